/**
 * Twilio's media stream messages (src/telephony/twilio/media-protocol.ts): the media messages read
 * on the fast path give the payload the general path (JSON and the schema) gives, for every
 * message; anything else is parsed or refused as before, never thrown on.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mediaMessage, parseTwilioMessage, TwilioInbound } from '../../src/telephony/twilio/media-protocol.js';

/** The general path: what `parseTwilioMessage` answered before it had a fast path. */
function general(text: string): { payload: string } | 'not media' | 'refused' {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return 'refused';
  }
  const parsed = TwilioInbound.safeParse(json);
  if (!parsed.success) return 'refused';
  return parsed.data.event === 'media' ? { payload: parsed.data.media.payload } : 'not media';
}

function read(text: string): { payload: string } | 'not media' | 'refused' {
  const parsed = parseTwilioMessage(Buffer.from(text, 'utf8'));
  if (!parsed.ok) return 'refused';
  return parsed.message.event === 'media' ? { payload: parsed.message.media.payload } : 'not media';
}

const twilioOrder = (seq: string, chunk: string, ts: string, payload: string, sid: string) =>
  `{"event":"media","sequenceNumber":"${seq}","media":{"track":"inbound","chunk":"${chunk}","timestamp":"${ts}","payload":"${payload}"},"streamSid":"${sid}"}`;

describe('parseTwilioMessage', () => {
  it("reads a media message in Twilio's key order, and with streamSid first", () => {
    const payload = Buffer.alloc(160, 0x7f).toString('base64');
    const sid = 'MZ18ad3ab5a668481ce02b83e7395059f0';
    expect(read(twilioOrder('3', '1', '5', payload, sid))).toEqual({ payload });
    const streamSidFirst = JSON.stringify({ event: 'media', sequenceNumber: '4', streamSid: sid, media: { track: 'inbound', chunk: '2', timestamp: '25', payload } });
    expect(read(streamSidFirst)).toEqual({ payload });
  });

  it('takes the general path for the other shapes, and refuses what the schema refuses', () => {
    const payload = 'AAEC';
    // other key orders, spaces, escapes: all valid, all read by JSON
    expect(read(`{ "event": "media", "media": { "payload": "${payload}" } }`)).toEqual({ payload });
    expect(read('{"event":"media","sequenceNumber":"1","media":{"track":"inbound","chunk":"1","timestamp":"1","payload":"\\u0041AEC"},"streamSid":"MZ1"}')).toEqual({ payload: 'AAEC' });
    expect(read('{"event":"media","sequenceNumber":"1","media":{"track":"inbound","chunk":"1","timestamp":"1","payload":"AAEC"},"streamSid":"MZ1","extra":1}')).toEqual({ payload });
    // refused: no payload, a payload that is not a string, a broken message
    expect(read('{"event":"media","media":{}}')).toBe('refused');
    expect(read('{"event":"media","media":{"payload":5}}')).toBe('refused');
    expect(read('{"event":"media","sequenceNumber":"1","media":{"track":"inbound","chunk":"1","timestamp":"1","payload":"AAEC"},"streamSid":"MZ1"')).toBe('refused');
    expect(read('{"event":"stop","streamSid":"MZ1"}')).toBe('not media');
  });

  it('gives what the general path gives, for media messages and their near misses (property)', () => {
    const b64 = fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b).toString('base64'));
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
      { numRuns: 3000 },
    );
  });

  it('never throws on bytes of any kind', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(() => parseTwilioMessage(Buffer.from(bytes))).not.toThrow();
      }),
      { numRuns: 2000 },
    );
  });
});

describe('mediaMessage', () => {
  it('is the JSON Twilio expects, for any frame and stream id', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 320 }), fc.string({ maxLength: 40 }), (frame, streamSid) => {
        const json = JSON.parse(mediaMessage(streamSid, Buffer.from(frame)));
        expect(json).toEqual({ event: 'media', streamSid, media: { payload: Buffer.from(frame).toString('base64') } });
      }),
    );
  });
});
