/**
 * Twilio's media stream messages (src/telephony/twilio/media-protocol.ts): the media messages read
 * from their bytes give the audio the general path (JSON, the schema, `Buffer.from(payload,
 * 'base64')`) gives, for every message; anything else is parsed or refused as before, never
 * thrown on. The outbound writer gives the JSON Twilio expects.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mediaAudio, mediaMessages, mediaSender, parseTwilioMessage, TwilioInbound } from '../../src/telephony/twilio/media-protocol.js';

type Read = { audio: string } | 'not media' | 'refused';

/** The general path: what `parseTwilioMessage` answered before it had a fast path, the audio in hex. */
function general(text: string): Read {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return 'refused';
  }
  const parsed = TwilioInbound.safeParse(json);
  if (!parsed.success) return 'refused';
  return parsed.data.event === 'media' ? { audio: Buffer.from(parsed.data.media.payload, 'base64').toString('hex') } : 'not media';
}

/** As the transport reads a message: `mediaAudio` first, `parseTwilioMessage` for the rest. */
function read(text: string): Read {
  const bytes = Buffer.from(text, 'utf8');
  const audio = mediaAudio(bytes);
  if (audio) return { audio: audio.toString('hex') };
  const parsed = parseTwilioMessage(bytes);
  if (!parsed.ok) return 'refused';
  return parsed.message.event === 'media' ? { audio: parsed.message.audio.toString('hex') } : 'not media';
}

const hexOf = (payload: string) => ({ audio: Buffer.from(payload, 'base64').toString('hex') });

const twilioOrder = (seq: string, chunk: string, ts: string, payload: string, sid: string) =>
  `{"event":"media","sequenceNumber":"${seq}","media":{"track":"inbound","chunk":"${chunk}","timestamp":"${ts}","payload":"${payload}"},"streamSid":"${sid}"}`;

describe('parseTwilioMessage', () => {
  it("reads a media message in Twilio's key order, and with streamSid first", () => {
    const payload = Buffer.alloc(160, 0x7f).toString('base64');
    const sid = 'MZ18ad3ab5a668481ce02b83e7395059f0';
    expect(read(twilioOrder('3', '1', '5', payload, sid))).toEqual(hexOf(payload));
    expect(mediaAudio(Buffer.from(twilioOrder('3', '1', '5', payload, sid)))).toEqual(Buffer.alloc(160, 0x7f));
    const streamSidFirst = JSON.stringify({ event: 'media', sequenceNumber: '4', streamSid: sid, media: { track: 'inbound', chunk: '2', timestamp: '25', payload } });
    expect(mediaAudio(Buffer.from(streamSidFirst))).toEqual(Buffer.alloc(160, 0x7f));
    const noSid = JSON.stringify({ event: 'media', sequenceNumber: '4', media: { track: 'outbound', chunk: '2', timestamp: '25', payload } });
    expect(mediaAudio(Buffer.from(noSid))).toEqual(Buffer.alloc(160, 0x7f));
  });

  it('leaves to the general path what is not in that shape', () => {
    const payload = 'AAEC';
    const frame = (s: string) => mediaAudio(Buffer.from(s));
    expect(frame('{ "event": "media", "media": { "payload": "AAEC" } }')).toBeNull();
    expect(frame(twilioOrder('1', '1', '1', payload, 'MZ1') + ' ')).toBeNull();
    expect(frame(twilioOrder('1', '1', '1', payload, 'MZ-1'))).toBeNull();
    expect(frame(twilioOrder('1234567890123456', '1', '1', payload, 'MZ1'))).toBeNull();
    expect(frame(twilioOrder('1', '1', '1', 'AA=A', 'MZ1'))).toBeNull();
    expect(frame(twilioOrder('1', '1', '1', 'AAEC===', 'MZ1'))).toBeNull();
    expect(frame(twilioOrder('1', '1', '1', payload, 'M'.repeat(65)))).toBeNull();
    expect(frame(twilioOrder('1', '1', '1', payload, 'M'.repeat(64)))).toEqual(Buffer.from([0, 1, 2]));
  });

  it('takes the general path for the other shapes, and refuses what the schema refuses', () => {
    const payload = 'AAEC';
    // other key orders, spaces, escapes: all valid, all read by JSON
    expect(read(`{ "event": "media", "media": { "payload": "${payload}" } }`)).toEqual(hexOf(payload));
    expect(read('{"event":"media","sequenceNumber":"1","media":{"track":"inbound","chunk":"1","timestamp":"1","payload":"\\u0041AEC"},"streamSid":"MZ1"}')).toEqual(hexOf('AAEC'));
    expect(read('{"event":"media","sequenceNumber":"1","media":{"track":"inbound","chunk":"1","timestamp":"1","payload":"AAEC"},"streamSid":"MZ1","extra":1}')).toEqual(hexOf(payload));
    // refused: no payload, a payload that is not a string, a broken message
    expect(read('{"event":"media","media":{}}')).toBe('refused');
    expect(read('{"event":"media","media":{"payload":5}}')).toBe('refused');
    expect(read('{"event":"media","sequenceNumber":"1","media":{"track":"inbound","chunk":"1","timestamp":"1","payload":"AAEC"},"streamSid":"MZ1"')).toBe('refused');
    expect(read('{"event":"stop","streamSid":"MZ1"}')).toBe('not media');
  });

  it('gives what the general path gives, for media messages and their near misses (property)', () => {
    // canonical base64, and any run of its characters with up to two `=` (lengths that are not a
    // multiple of four, padding where it does not belong): what Buffer.from makes of those counts
    const b64 = fc.oneof(
      fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b).toString('base64')),
      fc.stringMatching(/^[A-Za-z0-9+/]{0,40}={0,2}$/),
    );
    const digits = fc.stringMatching(/^\d{1,16}$/);
    const sid = fc.stringMatching(/^[A-Za-z0-9]{1,70}$/);
    const message = fc.tuple(digits, digits, digits, b64, sid).map(([a, b, c, p, s]) => twilioOrder(a, b, c, p, s));
    // a well-formed message, then the same with one character changed, cut or added
    const mutated = fc.tuple(message, fc.nat(), fc.constantFrom('cut', 'replace', 'insert'), fc.string({ minLength: 1, maxLength: 1, unit: 'binary' })).map(
      ([m, at, how, ch]) => {
        const i = at % m.length;
        if (how === 'cut') return m.slice(0, i) + m.slice(i + 1);
        if (how === 'replace') return m.slice(0, i) + ch + m.slice(i + 1);
        return m.slice(0, i) + ch + m.slice(i);
      },
    );
    fc.assert(
      fc.property(fc.oneof(message, mutated), (text) => {
        expect(read(text)).toEqual(general(text));
      }),
      { numRuns: 1000 },
    );
  });

  it('reads every message in the shape from its bytes, whatever the audio (property)', () => {
    const digits = fc.stringMatching(/^\d{1,15}$/);
    const sid = fc.stringMatching(/^[A-Za-z0-9]{1,64}$/);
    fc.assert(
      fc.property(digits, digits, digits, fc.uint8Array({ maxLength: 400 }), sid, (a, b, c, audio, s) => {
        const text = twilioOrder(a, b, c, Buffer.from(audio).toString('base64'), s);
        expect(mediaAudio(Buffer.from(text))).toEqual(Buffer.from(audio));
      }),
      { numRuns: 400 },
    );
  });

  it('never throws on bytes of any kind', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const b = Buffer.from(bytes);
        expect(() => mediaAudio(b) ?? parseTwilioMessage(b)).not.toThrow();
      }),
      { numRuns: 800 },
    );
  });
});

describe('mediaMessages', () => {
  it('writes the JSON Twilio expects, for any frame and stream id', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 320 }), fc.string({ maxLength: 40 }), (frame, streamSid) => {
        const json = JSON.parse(mediaMessages(streamSid)(Buffer.from(frame)).toString('utf8'));
        expect(json).toEqual({ event: 'media', streamSid, media: { payload: Buffer.from(frame).toString('base64') } });
      }),
    );
  });
});

describe('mediaSender', () => {
  type Op = { op: 'frame'; bytes: number; seed: number } | { op: 'flush' } | { op: 'drop' };
  const op: fc.Arbitrary<Op> = fc.oneof(
    { arbitrary: fc.record({ op: fc.constant('frame' as const), bytes: fc.constant(160), seed: fc.integer({ min: 0, max: 255 }) }), weight: 6 },
    { arbitrary: fc.record({ op: fc.constant('frame' as const), bytes: fc.integer({ min: 1, max: 700 }), seed: fc.integer({ min: 0, max: 255 }) }), weight: 1 },
    { arbitrary: fc.constant({ op: 'flush' as const }), weight: 2 },
    { arbitrary: fc.constant({ op: 'drop' as const }), weight: 1 },
  );

  it('sends every frame once, in order, in messages of at most N frames; holds nothing after a flush; a drop loses only what it held (property)', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), fc.integer({ min: 1, max: 3 }), (ops, n) => {
        const sent: Buffer[] = [];
        const sender = mediaSender('MZ1', n, (m) => {
          const json = JSON.parse(m.toString('utf8')) as { event: string; streamSid: string; media: { payload: string } };
          expect(json.event).toBe('media');
          expect(json.streamSid).toBe('MZ1');
          sent.push(Buffer.from(json.media.payload, 'base64'));
        });
        // the model: the frames of the message being filled, as a list; what has gone out
        const cap = n * 160;
        let pending: Buffer[] = [];
        let pendingBytes = 0;
        const expected: Buffer[] = [];
        const out = () => {
          if (pending.length > 0) expected.push(Buffer.concat(pending));
          pending = [];
          pendingBytes = 0;
        };
        for (const o of ops) {
          if (o.op === 'frame') {
            const frame = Buffer.alloc(o.bytes, o.seed);
            sender.frame(frame);
            if (pendingBytes + frame.length > cap) out();
            if (frame.length > cap) expected.push(frame);
            else {
              pending.push(frame);
              pendingBytes += frame.length;
              if (pendingBytes === cap) out();
            }
          } else if (o.op === 'flush') {
            out();
            sender.flush();
          } else {
            pending = [];
            pendingBytes = 0;
            sender.drop();
          }
          expect(sent).toEqual(expected);
          for (const m of sent) expect(m.length).toBeLessThanOrEqual(Math.max(n * 160, 700));
        }
        expect(sent).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('two 160-byte frames make one 40 ms message; a third waits for its pair or a flush', () => {
    const sent: number[] = [];
    const sender = mediaSender('MZ1', 2, (m) => sent.push(Buffer.from(JSON.parse(m.toString()).media.payload, 'base64').length));
    sender.frame(Buffer.alloc(160, 1));
    expect(sent).toEqual([]);
    sender.frame(Buffer.alloc(160, 2));
    expect(sent).toEqual([320]);
    sender.frame(Buffer.alloc(160, 3));
    expect(sent).toEqual([320]);
    sender.flush();
    expect(sent).toEqual([320, 160]);
    sender.flush();
    expect(sent).toEqual([320, 160]);
  });
});
