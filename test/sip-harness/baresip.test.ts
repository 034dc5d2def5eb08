/**
 * The baresip harness (test/helpers/baresip.ts) on its own: real baresip processes on 127.0.0.1
 * call each other over SIP/RTP, hear each other's WAV, send DTMF, hang up, refuse, transfer, and
 * answer a digest challenge from a tiny SIP stub. What is checked here is what the SIP endpoint's
 * end-to-end tests will rely on.
 */
import { createHash } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  Baresip,
  baresipAvailable,
  concatSamples,
  freeSipPort,
  readWav,
  rms,
  silence,
  stopAllBaresip,
  tone,
  toneRatio,
  windows,
  writeWav,
} from '../helpers/baresip.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!baresipAvailable())('baresip harness', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-sip-harness-'));
  });
  afterEach(() => stopAllBaresip());
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('A calls B: each hears the other, B gets A’s DTMF, A’s hang-up reaches B', async () => {
    // A says nothing for 0.5 s, then a 1 kHz tone for 1 s, then nothing; B says 600 Hz in a loop
    const aWav = join(dir, 'a.wav');
    const bWav = join(dir, 'b.wav');
    await writeWav(aWav, concatSamples(silence(0.5), tone(1000, 1)));
    await writeWav(bWav, tone(600, 0.25));
    const bHeard = join(dir, 'b-heard.wav');
    const b = await Baresip.start({ name: 'bob', autoAnswer: true, playWav: bWav, playMode: 'loop', recordWav: bHeard });
    const a = await Baresip.start({ name: 'alice', playWav: aWav });

    await a.dial(b.uri);
    const established = await a.waitFor('CALL_ESTABLISHED');
    expect(established).toMatchObject({ direction: 'outgoing', param: b.uri, peerUri: b.uri });
    const incoming = await b.waitFor('CALL_ESTABLISHED');
    expect(incoming).toMatchObject({ direction: 'incoming', callId: established.callId, peerUri: 'sip:alice@127.0.0.1' });
    // baresip's own auto-answer: 200 OK at once, no ringing, no CALL_INCOMING
    expect(b.events.some((e) => e.type === 'CALL_INCOMING')).toBe(false);

    await sleep(2300); // the whole of A's WAV, and some silence after it
    await a.sendDtmf('1#9');
    expect(await b.waitForDtmf('1#9')).toBe('1#9');
    expect((await b.waitFor('CALL_DTMF_START')).param).toBe('1');
    for (let i = 0; i < 3; i++) await b.waitFor('CALL_DTMF_END'); // 180 ms after each start

    await a.hangup();
    expect((await b.waitFor('CALL_CLOSED')).param).toBe('Connection reset by peer');
    expect((await a.waitFor('CALL_CLOSED')).param).toBe('Connection reset by user');

    // B's recording (written at CALL_CLOSED): 100 ms windows, quiet, then ~1 s of 1 kHz, then quiet
    const heard = (await readWav(bHeard)).samples;
    expect(heard.length).toBeGreaterThan(8000 * 2.5);
    const w = windows(heard, 100);
    const isTone = w.map((x) => rms(x) > 0.1 && toneRatio(x, 1000) > 0.8);
    const first = isTone.indexOf(true);
    const count = isTone.filter(Boolean).length;
    expect(first).toBeGreaterThanOrEqual(3);
    expect(first).toBeLessThanOrEqual(7);
    expect(count).toBeGreaterThanOrEqual(8);
    expect(count).toBeLessThanOrEqual(11);
    expect(w.slice(0, first - 1).every((x) => rms(x) < 0.01)).toBe(true); // the silence A sent before its tone
    expect(w.slice(first + count + 1).every((x) => rms(x) < 0.01)).toBe(true); // and after it
    expect(toneRatio(heard.subarray((first + 1) * 800, (first + 6) * 800), 600)).toBeLessThan(0.05); // not B's own voice

    // A heard B's loop the whole time (from its own sndfile dump)
    const aHeard = await a.heard();
    const loud = windows(aHeard, 100).filter((x) => rms(x) > 0.1 && toneRatio(x, 600) > 0.8).length;
    expect(loud / windows(aHeard, 100).length).toBeGreaterThan(0.9);
    expect(a.sentFiles).toHaveLength(1);
  });

  it('play() switches the microphone mid-call; heard() reads the call so far', async () => {
    const b = await Baresip.start({ name: 'bob', autoAnswer: true });
    const a = await Baresip.start({ name: 'alice' }); // silent
    await a.dial(b.uri);
    await b.waitFor('CALL_ESTABLISHED');
    await sleep(500);
    expect(rms(await b.heard())).toBeLessThan(0.01);
    const toneWav = join(dir, 'tone1500.wav');
    await writeWav(toneWav, tone(1500, 1));
    await a.play(toneWav, 'loop');
    await sleep(800);
    const heard = await b.heard();
    expect(toneRatio(heard.subarray(-8000 * 0.4), 1500)).toBeGreaterThan(0.8);
    expect(rms(heard.subarray(-8000 * 0.4))).toBeGreaterThan(0.1);
  });

  it('B hangs up; ringing then a manual answer; a refused call and an unknown user give their SIP status', async () => {
    const a = await Baresip.start({ name: 'alice' });
    const b = await Baresip.start({ name: 'bob' }); // answers only when told
    const c = await Baresip.start({ name: 'carol', autoAnswer: { afterMs: 400 } });

    // refused: B hangs up while ringing
    await a.dial(b.uri);
    const ringing = await b.waitFor('CALL_INCOMING');
    expect(ringing).toMatchObject({ direction: 'incoming', param: 'sip:alice@127.0.0.1' });
    await a.waitFor('CALL_RINGING');
    await b.hangup();
    expect((await a.waitFor('CALL_CLOSED')).param).toBe('486 Rejected');
    expect((await b.waitFor('CALL_CLOSED')).param).toBe('Connection reset by user');

    // nobody of that name there
    await a.dial(`sip:nobody@127.0.0.1:${b.sipPort}`);
    expect((await a.waitFor('CALL_CLOSED')).param).toBe('404 Not Found');

    // C rings for 400 ms, then the harness answers; C hangs up
    await a.dial(c.uri);
    const rung = await a.waitFor('CALL_RINGING');
    await c.waitFor('CALL_INCOMING');
    const up = await a.waitFor('CALL_ESTABLISHED');
    expect(up.at - rung.at).toBeGreaterThanOrEqual(300);
    await c.waitFor('CALL_ESTABLISHED');
    await c.hangup();
    expect((await a.waitFor('CALL_CLOSED')).param).toBe('Connection reset by peer');
    expect((await c.waitFor('CALL_CLOSED')).param).toBe('Connection reset by user');
  });

  it('REFER: baresip reports CALL_TRANSFER with the Refer-To and calls it; with acceptTransfer false it refuses', async () => {
    const a = await Baresip.start({ name: 'alice' });
    const b = await Baresip.start({ name: 'bob', autoAnswer: true });
    const c = await Baresip.start({ name: 'carol', autoAnswer: true });
    const d = await Baresip.start({ name: 'dave', autoAnswer: true, acceptTransfer: false });

    await a.dial(b.uri);
    await a.waitFor('CALL_ESTABLISHED');
    const first = await b.waitFor('CALL_ESTABLISHED');
    await a.transfer(c.uri); // A is the transferor, as our server will be
    const xfer = await b.waitFor('CALL_TRANSFER');
    expect(xfer).toMatchObject({ param: c.uri, callId: first.callId });
    // B calls the target; once that is up (NOTIFY 200), A hangs up its leg by itself
    // C sees B as the To of A's call (B's From on the new call)
    expect(await c.waitFor('CALL_ESTABLISHED')).toMatchObject({ peerUri: b.uri });
    expect(await b.waitFor('CALL_ESTABLISHED')).toMatchObject({ direction: 'outgoing', peerUri: c.uri });
    expect((await a.waitFor('CALL_CLOSED')).param).toBe('Call transfered');
    expect(await b.waitFor('CALL_CLOSED')).toMatchObject({ callId: first.callId, param: 'Connection reset by peer' });

    await a.dial(d.uri);
    await a.waitFor('CALL_ESTABLISHED');
    await a.transfer(c.uri);
    expect((await a.waitFor('CALL_TRANSFER_FAILED')).param).toBe('501 Not Implemented');
    expect(d.events.some((e) => e.type === 'CALL_TRANSFER')).toBe(false);
  });

  it('answers a digest challenge with username/password, and offers only the codecs asked for', async () => {
    // a SIP stub: 401 to the first INVITE, then 486 Busy Here to the authenticated one
    const port = await freeSipPort();
    const stub = createSocket('udp4');
    await new Promise<void>((r) => stub.bind(port, '127.0.0.1', r));
    const invites: string[] = [];
    stub.on('message', (buf, from) => {
      const msg = buf.toString();
      if (!msg.startsWith('INVITE ')) return; // ACKs
      const h = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'mi').exec(msg)?.[1] ?? '';
      if (!invites.includes(h('CSeq'))) invites.push(h('CSeq'));
      const challenge = invites.indexOf(h('CSeq')) === 0;
      const reply = [
        challenge ? 'SIP/2.0 401 Unauthorized' : 'SIP/2.0 486 Busy Here',
        `Via: ${h('Via')}`,
        `From: ${h('From')}`,
        `To: ${h('To')};tag=stub`,
        `Call-ID: ${h('Call-ID')}`,
        `CSeq: ${h('CSeq')}`,
        ...(challenge ? ['WWW-Authenticate: Digest realm="switchboard", nonce="n0nce", algorithm=MD5, qop="auth"'] : [`X-Auth: ${h('Authorization')}`]),
        'Content-Length: 0',
        '',
        '',
      ].join('\r\n');
      if (!challenge) lastAuth = { authorization: h('Authorization'), body: msg.split('\r\n\r\n')[1] ?? '' };
      stub.send(reply, from.port, from.address);
    });
    let lastAuth: { authorization: string; body: string } | undefined;
    try {
      const a = await Baresip.start({ name: 'alice', username: 'trunk-user', password: 's3cret', codecs: ['PCMA'] });
      const target = `sip:+15550001111@127.0.0.1:${port}`;
      await a.dial(target);
      expect((await a.waitFor('CALL_CLOSED')).param).toBe('486 Busy Here');

      const auth = lastAuth!.authorization;
      const field = (k: string) => new RegExp(`${k}="?([^",]+)"?`).exec(auth)?.[1];
      expect(field('username')).toBe('trunk-user');
      expect(field('realm')).toBe('switchboard');
      const md5 = (s: string) => createHash('md5').update(s).digest('hex');
      const ha1 = md5(`trunk-user:switchboard:s3cret`);
      const ha2 = md5(`INVITE:${field('uri')}`);
      expect(field('response')).toBe(md5(`${ha1}:n0nce:${field('nc')}:${field('cnonce')}:auth:${ha2}`));

      // the offer: PCMA and telephone-event only, 20 ms
      const sdp = lastAuth!.body;
      expect(sdp).toMatch(/^m=audio \d+ RTP\/AVP 8 101\r$/m);
      expect(sdp).toContain('a=rtpmap:101 telephone-event/8000');
      expect(sdp).toContain('a=ptime:20');
      expect(sdp).toContain('c=IN IP4 127.0.0.1');
    } finally {
      stub.close();
    }
  });

  it('stop() kills baresip and removes its files; a timeout names the events seen', async () => {
    const a = await Baresip.start({ name: 'alice' });
    await a.dial(`sip:nobody@127.0.0.1:${await freeSipPort()}`); // no answer: the INVITE is retransmitted
    const err = await a.waitFor('CALL_ESTABLISHED', 300).catch((e: Error) => e);
    expect(String(err)).toMatch(/baresip alice: waiting for CALL_ESTABLISHED: none within 300 ms; events seen: .*CALL_LOCAL_SDP\(offer\)/);
    const pid = a.pid!;
    await a.stop();
    expect(a.running).toBe(false);
    expect(() => process.kill(pid, 0)).toThrow();
    expect(existsSync(a.dir)).toBe(false);
    await expect(a.dial('sip:x@127.0.0.1')).rejects.toThrow(/not running/);
  });

  it('a SIP port that is taken is an error that says so', async () => {
    const port = await freeSipPort();
    const taken = createSocket('udp4');
    await new Promise<void>((r) => taken.bind(port, '127.0.0.1', r));
    try {
      await expect(Baresip.start({ name: 'alice', sipPort: port })).rejects.toThrow(new RegExp(`a port is taken \\(SIP ${port}[^]*Address already in use`));
    } finally {
      taken.close();
    }
  });
});
