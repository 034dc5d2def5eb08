/**
 * The SIP endpoint's server transactions over real UDP on 127.0.0.1, with short timers (T1 20 ms):
 * a failure to an INVITE is sent three times at most while no ACK comes (RFC 3261 §17.2.1's timer
 * G, bounded: no reflection toward a spoofed source), a 2xx until its ACK as before.
 */
import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { SipEndpoint } from '../../src/telephony/sip/endpoint.js';
import { header } from '../../src/telephony/sip/message.js';

const T1 = 20;
const open: { close(): unknown }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

async function endpoint(): Promise<SipEndpoint> {
  const e = new SipEndpoint({
    host: '127.0.0.1',
    port: 0,
    logger: pino({ level: 'silent' }),
    timers: { t1Ms: T1, t2Ms: 8 * T1 },
    // a Call-ID starting `ok` is answered 200, any other 401
    onRequest: (req, _remote, tx) => {
      if (header(req, 'call-id')!.startsWith('ok')) tx.respond(200, 'OK', 'x');
      else tx.respond(401, 'Unauthorized', 'x', [['www-authenticate', 'Digest realm="switchboard", nonce="n"']]);
    },
  });
  await e.start();
  open.push(e);
  return e;
}

/** A peer that sends INVITEs and never ACKs: the status lines it got, by Call-ID. */
async function peer(port: number) {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  open.push(s);
  const got = new Map<string, number[]>();
  s.on('message', (m) => {
    const text = m.toString('latin1');
    const callId = /\r\nCall-ID: *([^\r\n]+)/i.exec(text)?.[1] ?? '';
    got.set(callId, [...(got.get(callId) ?? []), Number(text.split(' ')[1])]);
  });
  const invite = (callId: string) =>
    new Promise<void>((r) =>
      s.send(
        Buffer.from(
          `INVITE sip:+15550001111@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:${(s.address() as { port: number }).port};branch=z9hG4bK${callId}\r\n` +
            `From: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:+15550001111@127.0.0.1>\r\nCall-ID: ${callId}\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n`,
        ),
        port,
        '127.0.0.1',
        () => r(),
      ),
    );
  return { got, invite };
}

describe('SIP server transactions over UDP', () => {
  it('a 401 no ACK follows is sent three times in all (not until timer H); a 200 goes on until its ACK', async () => {
    const e = await endpoint();
    const p = await peer(e.port);
    await p.invite('challenged');
    await p.invite('ok-answered');
    // past timer H (64×T1): every transaction is over, its copies all sent
    await new Promise((r) => setTimeout(r, 64 * T1 + 400));
    expect(p.got.get('challenged')).toEqual([100, 401, 401, 401]);
    const ok = p.got.get('ok-answered')!;
    expect(ok.slice(0, 2)).toEqual([100, 200]);
    expect(ok.filter((s) => s === 200).length).toBeGreaterThan(4);
  });
});
