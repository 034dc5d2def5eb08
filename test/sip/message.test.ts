import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  parseMessage,
  parseNameAddr,
  parseUri,
  parseVia,
  responseTo,
  serialize,
  SipStreamFramer,
  tagOf,
  type SipRequest,
} from '../../src/telephony/sip/message.js';
import { answerChallenge, challenge, verifyDigest } from '../../src/telephony/sip/digest.js';
import { answer, negotiate, offer } from '../../src/telephony/sip/sdp.js';
import { ALAW_TO_MULAW, MULAW_TO_ALAW, parseRtp } from '../../src/telephony/sip/rtp.js';
import { addressAllowed, parseSipProxy, sipAddressRange } from '../../src/telephony/sip/addresses.js';
import { calledNumber } from '../../src/telephony/sip/telephony.js';

const INVITE = [
  'INVITE sip:+15550001111@127.0.0.1:5070 SIP/2.0',
  'Via: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bK776asdhds;rport',
  'Max-Forwards: 70',
  'To: <sip:+15550001111@127.0.0.1>',
  'From: "Dana" <sip:+15557654321@127.0.0.1>;tag=1928301774',
  'Call-ID: a84b4c76e66710@pc33.example.com',
  'CSeq: 314159 INVITE',
  'Contact: <sip:dana@127.0.0.1:5080>',
  'Content-Type: application/sdp',
  'Content-Length: 4',
  '',
  'v=0\r\nignored',
].join('\r\n');

describe('SIP messages', () => {
  it('parses a request: headers by name, the body cut to Content-Length', () => {
    const parsed = parseMessage(Buffer.from(INVITE));
    expect(parsed.ok).toBe(true);
    const m = (parsed as { message: SipRequest }).message;
    expect(m.kind).toBe('request');
    expect(m.method).toBe('INVITE');
    expect(m.uri).toBe('sip:+15550001111@127.0.0.1:5070');
    expect(m.headers.get('call-id')).toEqual(['a84b4c76e66710@pc33.example.com']);
    expect(m.body.toString()).toBe('v=0\r');
    expect(tagOf(m.headers.get('from')![0])).toBe('1928301774');
    expect(parseVia(m.headers.get('via')![0]!)).toMatchObject({ transport: 'UDP', host: '127.0.0.1', port: 5080 });
  });

  it('expands compact header names, joins folded lines and splits lists', () => {
    const text = [
      'BYE sip:a@b SIP/2.0',
      'v: SIP/2.0/TCP h1;branch=z9hG4bK1, SIP/2.0/UDP h2;branch=z9hG4bK2',
      'f: <sip:a@b>;tag=1',
      't: <sip:c@d>',
      'i: x',
      'CSeq: 2',
      '  BYE',
      'l: 0',
      '',
      '',
    ].join('\r\n');
    const parsed = parseMessage(Buffer.from(text));
    expect(parsed.ok).toBe(true);
    const m = (parsed as { message: SipRequest }).message;
    expect(m.headers.get('via')).toHaveLength(2);
    expect(m.headers.get('cseq')).toEqual(['2 BYE']);
  });

  it('a header named like a prototype property is a header like any other: read by its name, written back', () => {
    const text = INVITE.replace('Max-Forwards: 70', 'Max-Forwards: 70\r\nconstructor: x\r\n__proto__: y\r\ntoString: z');
    const parsed = parseMessage(Buffer.from(text));
    expect(parsed.ok).toBe(true);
    const m = (parsed as { message: SipRequest }).message;
    expect([...m.headers.keys()].every((k) => typeof k === 'string')).toBe(true);
    expect(m.headers.get('constructor')).toEqual(['x']);
    expect(m.headers.get('__proto__')).toEqual(['y']);
    expect(m.headers.get('tostring')).toEqual(['z']);
    const written = serialize(m).toString('latin1');
    expect(written).toContain('\r\nConstructor: x\r\n');
    expect(written).toContain('\r\n__proto__: y\r\n');
  });

  it('writes what it read, and a response copies the dialog headers', () => {
    const m = (parseMessage(Buffer.from(INVITE)) as { message: SipRequest }).message;
    const again = parseMessage(serialize(m));
    expect(again.ok && again.message.headers.get('from')).toEqual(m.headers.get('from'));
    const r = responseTo(m, 180, 'Ringing', 'abc');
    const back = parseMessage(serialize(r));
    expect(back.ok && back.message.kind === 'response' && back.message.status).toBe(180);
    expect(tagOf(r.headers.get('to')![0])).toBe('abc');
    expect(r.headers.get('via')).toEqual(m.headers.get('via'));
  });

  it.each([
    ['no blank line', 'INVITE sip:a@b SIP/2.0\r\nVia: x'],
    ['a bad start line', 'HELLO\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: a\r\nTo: b\r\nCall-ID: c\r\nCSeq: 1 HELLO\r\n\r\n'],
    ['a missing Call-ID', 'OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: a\r\nTo: b\r\nCSeq: 1 OPTIONS\r\n\r\n'],
    ['a bad CSeq', 'OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: a\r\nTo: b\r\nCall-ID: c\r\nCSeq: x\r\n\r\n'],
    ['a short body', 'OPTIONS sip:a@b SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: a\r\nTo: b\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\nContent-Length: 99\r\n\r\nabc'],
    ['a header without a name', 'OPTIONS sip:a@b SIP/2.0\r\n: x\r\n\r\n'],
    ['an http: Request-URI', 'OPTIONS http://a SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bK1\r\nFrom: a\r\nTo: b\r\nCall-ID: c\r\nCSeq: 1 OPTIONS\r\n\r\n'],
  ])('refuses %s, with a reason', (_what, text) => {
    const parsed = parseMessage(Buffer.from(text));
    expect(parsed.ok).toBe(false);
    expect((parsed as { reason: string }).reason).toMatch(/\w/);
  });

  it('never throws on any bytes, nor on a valid message cut or changed anywhere (fuzz)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), (bytes) => {
        parseMessage(Buffer.from(bytes));
        new SipStreamFramer().push(Buffer.from(bytes));
      }),
      { numRuns: 2000 },
    );
    const base = Buffer.from(INVITE);
    fc.assert(
      fc.property(fc.nat(base.length - 1), fc.nat(base.length), fc.uint8Array({ maxLength: 40 }), (at, cut, insert) => {
        const mutated = Buffer.concat([base.subarray(0, at), Buffer.from(insert), base.subarray(Math.min(base.length, at + (cut % 8)))]);
        const parsed = parseMessage(mutated);
        if (parsed.ok) {
          // whatever parses, writes and parses again
          expect(parseMessage(serialize(parsed.message)).ok).toBe(true);
          for (const v of parsed.message.headers.get('from') ?? []) parseNameAddr(v);
          if (parsed.message.kind === 'request') parseUri(parsed.message.uri);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it('cuts messages out of a stream however it is split, skipping keep-alives', () => {
    const one = Buffer.from(INVITE.replace('Content-Length: 4', 'Content-Length: 12'));
    const stream = Buffer.concat([Buffer.from('\r\n\r\n'), one, one]);
    for (const size of [1, 7, 64, stream.length]) {
      const framer = new SipStreamFramer();
      const got: Buffer[] = [];
      for (let i = 0; i < stream.length; i += size) {
        const r = framer.push(stream.subarray(i, i + size));
        expect(r.error).toBeUndefined();
        got.push(...r.messages);
      }
      expect(got.map((b) => b.length)).toEqual([one.length, one.length]);
    }
    expect(new SipStreamFramer().push(Buffer.from('OPTIONS sip:a@b SIP/2.0\r\nVia: x\r\n\r\n')).error).toMatch(/Content-Length/);
    expect(new SipStreamFramer().push(Buffer.alloc(20_000, 65)).error).toMatch(/size limit/);
  });

  it('reads URIs, with or without a user, port and parameters', () => {
    expect(parseUri('sip:+15550001111@10.0.0.1:5070;transport=tcp')).toMatchObject({ user: '+15550001111', host: '10.0.0.1', port: 5070 });
    expect(parseUri('sip:sip.telnyx.com')).toMatchObject({ user: '', host: 'sip.telnyx.com', port: null });
    expect(parseUri('sip:%2B1555@[::1]:5060')).toMatchObject({ user: '+1555', host: '::1' });
    expect(parseUri('tel:+1555')).toBeNull();
    expect(parseUri('sip:a@b:99999')).toBeNull();
    expect(calledNumber('+15550001111')).toBe('+15550001111');
    expect(calledNumber('15550001111')).toBe('+15550001111');
    expect(calledNumber('alice')).toBeNull();
    // number portability parameters in the user part (RFC 4694)
    expect(parseUri('sip:+15551234567;npdi;rn=+15559990000@10.0.0.1;user=phone')).toMatchObject({ user: '+15551234567', host: '10.0.0.1' });
  });
});

describe('digest authentication', () => {
  const creds = { username: 'trunk', password: 's3cret' };

  it('a challenge answered with the right password passes; a wrong one, another realm or a missing answer do not', () => {
    const auth = answerChallenge(challenge('switchboard'), 'INVITE', 'sip:+1555@h', creds)!;
    expect(verifyDigest(auth, 'INVITE', creds, 'switchboard')).toBe('ok');
    expect(verifyDigest(auth, 'INVITE', { ...creds, password: 'nope' }, 'switchboard')).toBe('wrong');
    expect(verifyDigest(auth, 'BYE', creds, 'switchboard')).toBe('wrong');
    expect(verifyDigest(auth, 'INVITE', creds, 'other')).toBe('wrong');
    expect(verifyDigest(undefined, 'INVITE', creds, 'switchboard')).toBe('missing');
    expect(verifyDigest('Basic abc', 'INVITE', creds, 'switchboard')).toBe('wrong');
  });

  it('an answer for another Request-URI, bytes a response never holds, or an endless header: wrong, never a throw', () => {
    const auth = answerChallenge(challenge('switchboard'), 'INVITE', 'sip:+1555@h', creds)!;
    expect(verifyDigest(auth, 'INVITE', creds, 'switchboard', 'sip:+1555@h')).toBe('ok');
    expect(verifyDigest(auth, 'INVITE', creds, 'switchboard', 'sip:+1666@h')).toBe('wrong');
    const odd = auth.replace(/response="[0-9a-f]{32}"/, `response="${'é'.repeat(32)}"`);
    expect(verifyDigest(odd, 'INVITE', creds, 'switchboard')).toBe('wrong');
    const long = `Digest ${'a'.repeat(15_000)}`;
    const started = performance.now();
    expect(verifyDigest(long, 'INVITE', creds, 'switchboard')).toBe('wrong');
    expect(verifyDigest(`Digest ${'x="y", '.repeat(300)}`, 'INVITE', creds, 'switchboard')).toBe('wrong');
    expect(performance.now() - started).toBeLessThan(50);
    fc.assert(fc.property(fc.string({ maxLength: 600 }), (v) => void verifyDigest(`Digest ${v}`, 'INVITE', creds, 'switchboard')), { numRuns: 1000 });
  });

  it('a nonce we did not make is refused, however the response is computed', () => {
    const forged = answerChallenge('Digest realm="switchboard", nonce="ffffffff.AAAAAAAAAAAAAAAAAAAAAA", qop="auth"', 'INVITE', 'sip:x@y', creds)!;
    expect(verifyDigest(forged, 'INVITE', creds, 'switchboard')).toBe('stale');
  });

  it('answers a proxy challenge without qop (RFC 2069 style)', () => {
    const auth = answerChallenge('Digest realm="r", nonce="n"', 'INVITE', 'sip:x@y', creds)!;
    expect(auth).toMatch(/^Digest username="trunk", realm="r", nonce="n", uri="sip:x@y", algorithm=MD5, response="[0-9a-f]{32}"$/);
  });
});

describe('SDP', () => {
  const sdp = (m: string, extra = '') => `v=0\r\no=- 1 1 IN IP4 10.0.0.5\r\ns=-\r\nc=IN IP4 10.0.0.5\r\nt=0 0\r\nm=${m}\r\n${extra}`;

  it('takes PCMU or PCMA, in the offer\'s order, with telephone-event', () => {
    const n = negotiate(sdp('audio 4000 RTP/AVP 8 0 101', 'a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-16\r\n'));
    expect(n).toEqual({ codec: 'PCMA', payload: 8, dtmfPayload: 101, address: '10.0.0.5', port: 4000, direction: 'sendrecv', declined: [], audioIndex: 0 });
    const answered = negotiate(answer({ address: '127.0.0.1', port: 10002, sessionId: 7 }, n as never));
    expect(answered).toMatchObject({ codec: 'PCMA', dtmfPayload: 101, address: '127.0.0.1', port: 10002 });
    expect(negotiate(offer({ address: '127.0.0.1', port: 10004, sessionId: 1 }))).toMatchObject({ codec: 'PCMU', dtmfPayload: 101 });
  });

  it('mirrors a hold, and answers every stream of the offer (others with port 0)', () => {
    const held = negotiate(sdp('audio 4000 RTP/AVP 0', 'a=sendonly\r\n'));
    expect(held).toMatchObject({ direction: 'sendonly' });
    const answered = answer({ address: '127.0.0.1', port: 10_002, sessionId: 1 }, held as never);
    expect(answered).toMatch(/a=recvonly/);
    const both = negotiate(`v=0\r\no=- 1 1 IN IP4 10.0.0.5\r\ns=-\r\nc=IN IP4 10.0.0.5\r\nt=0 0\r\nm=video 5000 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\nm=audio 4000 RTP/AVP 0\r\n`);
    expect(both).toMatchObject({ audioIndex: 1, declined: [{ type: 'video' }] });
    const lines = answer({ address: '127.0.0.1', port: 10_002, sessionId: 1 }, both as never).split('\r\n').filter((l) => l.startsWith('m='));
    expect(lines).toEqual(['m=video 0 RTP/AVP 96', 'm=audio 10002 RTP/AVP 0']);
  });

  it.each([
    ['a port RTP cannot use', sdp('audio 99999 RTP/AVP 0'), /not one RTP can use/],
    ['port 65535 (RTCP would be past the last port)', sdp('audio 65535 RTP/AVP 0'), /not one RTP can use/],
    ['no common codec', sdp('audio 4000 RTP/AVP 9 18'), /no common codec/],
    ['no audio', sdp('video 4000 RTP/AVP 96'), /no audio/],
    ['SRTP', sdp('audio 4000 RTP/SAVP 0'), /RTP\/SAVP/],
    ['no address', 'v=0\r\no=- 1 1 IN IP4 x\r\ns=-\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n', /connection address/],
  ])('refuses %s', (_what, body, problem) => {
    expect((negotiate(body) as { problem: string }).problem).toMatch(problem);
  });

  it('never throws on garbage (fuzz)', () => {
    fc.assert(fc.property(fc.string({ maxLength: 500 }), (s) => void negotiate(s)), { numRuns: 1000 });
  });
});

describe('RTP', () => {
  it('parses a packet, and nothing that is not one', () => {
    const b = Buffer.alloc(12 + 160);
    b[0] = 0x80;
    b[1] = 0x80 | 8;
    b.writeUInt16BE(65535, 2);
    b.writeUInt32BE(1234, 4);
    expect(parseRtp(b)).toMatchObject({ marker: true, payloadType: 8, seq: 65535, timestamp: 1234 });
    expect(parseRtp(b)!.payload.length).toBe(160);
    expect(parseRtp(Buffer.alloc(5))).toBeNull();
    fc.assert(fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => void parseRtp(Buffer.from(bytes))), { numRuns: 2000 });
  });

  it('maps A-law and μ-law both ways within one step', () => {
    for (let i = 0; i < 256; i++) {
      const back = ALAW_TO_MULAW[MULAW_TO_ALAW[i]!]!;
      expect(Math.abs((back & 0x7f) - (i & 0x7f))).toBeLessThanOrEqual(2);
    }
  });
});

describe('trunk addresses', () => {
  it('checks sources against addresses and ranges', () => {
    expect(sipAddressRange('203.0.113.0/24')).toMatchObject({ prefix: 24, family: 'ipv4' });
    expect(sipAddressRange('203.0.113.0/33')).toBeNull();
    expect(sipAddressRange('example.com')).toBeNull();
    expect(addressAllowed('203.0.113.9', ['203.0.113.0/24'])).toBe(true);
    expect(addressAllowed('::ffff:203.0.113.9', ['203.0.113.0/24'])).toBe(true);
    expect(addressAllowed('203.0.114.9', ['203.0.113.0/24'])).toBe(false);
    expect(addressAllowed('2001:db8::1', ['2001:db8::/32'])).toBe(true);
    expect(addressAllowed('127.0.0.1', [])).toBe(false);
    expect(parseSipProxy('sip:sip.telnyx.com')).toEqual({ host: 'sip.telnyx.com', port: 5060, protocol: 'UDP' });
    expect(parseSipProxy('sip:10.0.0.1:5080;transport=tcp')).toEqual({ host: '10.0.0.1', port: 5080, protocol: 'TCP' });
    expect(parseSipProxy('sip:user@host')).toBeNull();
    expect(parseSipProxy('sip:host;transport=tls')).toBeNull();
  });
});
