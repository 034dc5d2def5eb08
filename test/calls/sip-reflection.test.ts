/**
 * Unauthenticated INVITEs as a reflection path (issue 30): a 401 goes to wherever an INVITE
 * claims to come from. Over real UDP on 127.0.0.1, against a server whose trunk asks for digest
 * credentials (T1 shortened to 50 ms so that timer H passes in 3.2 s): a challenge no ACK follows
 * is sent three times at most, and a source that keeps drawing challenges is shunned.
 */
import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, frontDesk, startCallingServer, type CallingServer } from '../helpers/calls.js';

const T1 = 50;
let s: CallingServer;
let sipPort: number;
let number: string;
const sockets: dgram.Socket[] = [];

beforeAll(async () => {
  s = await startCallingServer({ RTP_PORT_MIN: '32600', RTP_PORT_MAX: '32700' }, { sip: { port: 0, timers: { t1Ms: T1, t2Ms: 8 * T1 } } });
  sipPort = s.runtime.sip!.port;
  const account = await s.api('PATCH', '/account', { sip: { inbound: { allowed_addresses: [], username: 'acme-trunk', password: 'right-password' } } });
  expect(account.status).toBe(200);
  ({ number } = await s.setUpNumber({ provider: 'sip', definition: frontDesk }));
});
afterAll(async () => {
  for (const socket of sockets) socket.close();
  await s?.close();
});

/** A source on `address` that sends INVITEs without credentials and never ACKs: the statuses it got, by Call-ID. */
async function spoofed(address: string) {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, address, () => r()));
  sockets.push(socket);
  const got = new Map<string, number[]>();
  socket.on('message', (m) => {
    const text = m.toString('latin1');
    const callId = /\r\nCall-ID: *([^\r\n]+)/i.exec(text)?.[1] ?? '';
    got.set(callId, [...(got.get(callId) ?? []), Number(text.split(' ')[1])]);
  });
  const port = (socket.address() as { port: number }).port;
  const invite = (callId: string) =>
    new Promise<void>((r) =>
      socket.send(
        Buffer.from(
          `INVITE sip:${number}@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP ${address}:${port};branch=z9hG4bK${callId}\r\nMax-Forwards: 70\r\n` +
            `From: <sip:+15005550199@${address}>;tag=${callId}\r\nTo: <sip:${number}@127.0.0.1>\r\nCall-ID: ${callId}\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n`,
        ),
        sipPort,
        '127.0.0.1',
        () => r(),
      ),
    );
  return { got, invite };
}

const finals = (statuses: number[] | undefined) => (statuses ?? []).filter((s) => s >= 200);
const metric = async (reason: string) =>
  Number(new RegExp(`switchboard_sip_invites_refused_total\\{reason="${reason}"\\} (\\d+)`).exec(await (await fetch(`${s.baseUrl}/metrics`)).text())?.[1] ?? 0);

describe('SIP digest challenges are no reflection path', () => {
  it('an unauthenticated INVITE no ACK follows draws its 401 three times at most, not eleven', async () => {
    const source = await spoofed('127.0.0.6');
    await source.invite('one-challenge');
    // past timer H (64×T1): the transaction is over, every copy it would send is sent
    await new Promise((r) => setTimeout(r, 64 * T1 + 500));
    const statuses = source.got.get('one-challenge')!;
    expect(statuses[0]).toBe(100);
    expect(finals(statuses)).toEqual([401, 401, 401]);
  });

  it('a source that draws 50 challenges it never answers is shunned: its next INVITEs get no answer', async () => {
    const source = await spoofed('127.0.0.7');
    const shunnedBefore = await metric('shunned');
    // in fives, each answered before the next (a source not known as a trunk has 20 INVITEs in flight at most)
    for (let batch = 0; batch < 10; batch++) {
      const ids = [0, 1, 2, 3, 4].map((i) => `challenge-${batch * 5 + i}`);
      for (const id of ids) await source.invite(id);
      await eventually(`the 401s of batch ${batch}`, () => ids.every((id) => finals(source.got.get(id)).length > 0));
    }
    for (let i = 0; i < 50; i++) expect(finals(source.got.get(`challenge-${i}`))[0]).toBe(401);
    for (let i = 0; i < 10; i++) await source.invite(`after-${i}`);
    await new Promise((r) => setTimeout(r, 500));
    for (let i = 0; i < 10; i++) expect(finals(source.got.get(`after-${i}`))).toEqual([]);
    expect((await metric('shunned')) - shunnedBefore).toBe(10);
    // another source is still challenged
    const other = await spoofed('127.0.0.8');
    await other.invite('elsewhere');
    await eventually('the other source challenged', () => finals(other.got.get('elsewhere')).length > 0);
    expect(finals(other.got.get('elsewhere'))[0]).toBe(401);
  });
});
