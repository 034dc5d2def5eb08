/**
 * Telnyx's wire, piece by piece: webhook signatures (ours verified against the official SDK's
 * verifier, both ways), the media streaming frames (parsed without throwing, whose audio is
 * whose), the messages we send back, and what a `hangup_cause` means for an outbound call.
 */
import { TelnyxWebhook } from 'telnyx/lib/webhooks';
import { describe, expect, it } from 'vitest';
import { CLEAR_MESSAGE, isMulaw8k, markMessage, mediaFrame, mediaMessage, mediaSender, parseTelnyxFrame } from '../../src/telephony/telnyx/media-protocol.js';
import { publicKeyBytes, telnyxKeyPair, telnyxSignature, telnyxSignatureProblem } from '../../src/telephony/telnyx/signature.js';
import { hangupOutcome } from '../../src/telephony/telnyx/telephony.js';

describe('webhook signatures (Ed25519 over "timestamp|body")', () => {
  const keys = telnyxKeyPair();
  const body = '{"data":{"event_type":"call.initiated","payload":{"to":"+14155550100"}},"meta":{"attempt":1}}';
  const now = Math.floor(Date.now() / 1000);
  const headers = (timestamp = now, payload = body, key = keys.privateKey) => ({
    'telnyx-signature-ed25519': telnyxSignature(key, String(timestamp), payload),
    'telnyx-timestamp': String(timestamp),
  });

  it("what we sign, Telnyx's SDK verifies with the public key as the portal shows it (base64 of 32 bytes)", async () => {
    expect(keys.publicKey).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(publicKeyBytes(keys.publicKey)).toHaveLength(32);
    await expect(new TelnyxWebhook(keys.publicKey).verify(body, headers())).resolves.toBeUndefined();
    // and it refuses what ours refuses
    await expect(new TelnyxWebhook(keys.publicKey).verify(body.replace('+1415', '+1416'), headers())).rejects.toThrow(/does not match/);
    await expect(new TelnyxWebhook(keys.publicKey).verify(body, headers(now - 301))).rejects.toThrow(/too old/);
  });

  it('ours takes exactly what the SDK takes, and says why it refuses', () => {
    const h = headers();
    const check = (payload: string, sig?: string, ts?: string, key = keys.publicKey) => telnyxSignatureProblem(key, payload, sig, ts, now);
    expect(check(body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'])).toBeNull();
    expect(check(Buffer.from(body) as unknown as string, h['telnyx-signature-ed25519'], h['telnyx-timestamp'])).toBeNull();
    expect(check(`${body} `, h['telnyx-signature-ed25519'], h['telnyx-timestamp'])).toBe('signature');
    expect(check(body, headers(now, body, telnyxKeyPair().privateKey)['telnyx-signature-ed25519'], h['telnyx-timestamp'])).toBe('signature');
    expect(check(body, h['telnyx-signature-ed25519'], String(now + 1))).toBe('signature');
    expect(check(body, headers(now - 301)['telnyx-signature-ed25519'], String(now - 301))).toBe('timestamp');
    expect(check(body, headers(now + 301)['telnyx-signature-ed25519'], String(now + 301))).toBe('timestamp');
    expect(check(body, headers(now - 299)['telnyx-signature-ed25519'], String(now - 299))).toBeNull();
    expect(check(body, h['telnyx-signature-ed25519'], '1e9')).toBe('timestamp');
    expect(check(body, undefined, h['telnyx-timestamp'])).toBe('missing');
    expect(check(body, h['telnyx-signature-ed25519'], undefined)).toBe('missing');
    expect(check(body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], '')).toBe('missing');
    expect(check(body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 'bm90IGEga2V5')).toBe('missing');
    expect(check(body, 'not base64!', h['telnyx-timestamp'])).toBe('signature');
    expect(check(body, Buffer.alloc(63).toString('base64'), h['telnyx-timestamp'])).toBe('signature');
  });
});

describe('media streaming frames', () => {
  const payload = Buffer.alloc(160, 0x55).toString('base64');

  it("reads Telnyx's frames; with both tracks, only the inbound one is the far party's", () => {
    const inbound = JSON.stringify({ event: 'media', sequence_number: '4', media: { track: 'inbound', chunk: '2', timestamp: '20', payload }, stream_id: '32de0dea-53cb' });
    const outbound = inbound.replace('"inbound"', '"outbound"');
    expect(mediaFrame(Buffer.from(inbound))).toEqual({ inbound: true, audio: Buffer.alloc(160, 0x55) });
    expect(mediaFrame(Buffer.from(outbound))).toEqual({ inbound: false, audio: Buffer.alloc(160, 0x55) });
    // other key orders and spacing take the general path, with the same answer
    const reordered = JSON.stringify({ stream_id: 'x', event: 'media', media: { payload, track: 'outbound' } });
    expect(mediaFrame(Buffer.from(reordered))).toBeNull();
    expect(parseTelnyxFrame(reordered)).toEqual({ ok: true, message: { event: 'media', inbound: false, audio: Buffer.alloc(160, 0x55) } });
    // an inbound_track stream's frames may carry no track: the far party's
    expect(parseTelnyxFrame(JSON.stringify({ event: 'media', media: { payload } }))).toMatchObject({ ok: true, message: { inbound: true } });
  });

  it('start, dtmf, mark, stop and error frames as documented; garbage is a reason, never a throw', () => {
    const start = {
      event: 'start',
      sequence_number: '1',
      stream_id: '32DE0DEA-53CB-4B21-89A4-9E1819C043BC',
      start: {
        user_id: '3E6F995F-85F7-4705-9741-53B116D28237',
        call_control_id: 'v2:T02llQxIyaRkhfRKxgAP8nY511EhFLizdvdUKJiSw8d6A9BborherQ',
        call_session_id: 'ff55a038-6f5d-11ef-9692-02420aeffb1f',
        from: '+13122010094',
        to: '+13122123456',
        tags: ['TAG1', 'TAG2'],
        client_state: 'aGF2ZSBhIG5pY2UgZGF5ID1d',
        custom_parameters: { customer_id: 'customer_123' },
        media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 },
      },
    };
    expect(parseTelnyxFrame(JSON.stringify(start))).toMatchObject({ ok: true, message: { event: 'start', start: { call_control_id: start.start.call_control_id } } });
    expect(parseTelnyxFrame('{"event":"dtmf","stream_id":"s","occurred_at":"x","sequence_number":"9","dtmf":{"digit":"#"}}')).toMatchObject({ ok: true, message: { dtmf: { digit: '#' } } });
    expect(parseTelnyxFrame('{"event":"mark","sequence_number":"5","stream_id":"s","mark":{"name":"u1"}}')).toMatchObject({ ok: true, message: { mark: { name: 'u1' } } });
    expect(parseTelnyxFrame('{"event":"stop","sequence_number":"6","stop":{"user_id":"u","call_control_id":"c"},"stream_id":"s"}')).toMatchObject({ ok: true, message: { event: 'stop' } });
    expect(parseTelnyxFrame('{"event":"error","payload":{"code":100003,"title":"malformed_frame","detail":"Unable to parse"},"stream_id":"s"}')).toMatchObject({ ok: true, message: { event: 'error' } });
    expect(parseTelnyxFrame('{"event":"connected","version":"1.0.0"}')).toEqual({ ok: true, message: { event: 'connected', version: '1.0.0' } });
    for (const junk of ['', 'not json', '[]', 'null', '{"event":"media"}', '{"event":"dtmf","dtmf":{"digit":"12"}}', '{"event":"surprise"}']) {
      const parsed = parseTelnyxFrame(junk);
      expect(parsed.ok, junk).toBe(false);
    }
  });

  it('only PCMU 8 kHz mono is taken (what the answer asked for)', () => {
    expect(isMulaw8k(undefined)).toBe(true);
    expect(isMulaw8k({ encoding: 'PCMU', sample_rate: 8000, channels: 1 })).toBe(true);
    expect(isMulaw8k({ encoding: 'audio/x-mulaw' })).toBe(true);
    expect(isMulaw8k({ encoding: 'PCMA', sample_rate: 8000, channels: 1 })).toBe(false);
    expect(isMulaw8k({ encoding: 'L16', sample_rate: 16000, channels: 1 })).toBe(false);
  });

  it('what we send: media with a base64 RTP payload, 40 ms a message; mark; clear', () => {
    expect(JSON.parse(mediaMessage(Buffer.alloc(160, 1)).toString())).toEqual({ event: 'media', media: { payload: Buffer.alloc(160, 1).toString('base64') } });
    expect(JSON.parse(markMessage('u3'))).toEqual({ event: 'mark', mark: { name: 'u3' } });
    expect(JSON.parse(CLEAR_MESSAGE)).toEqual({ event: 'clear' });
    const sent: Buffer[] = [];
    const sender = mediaSender(2, (m) => sent.push(m));
    sender.frame(Buffer.alloc(160, 1));
    expect(sent).toHaveLength(0);
    sender.frame(Buffer.alloc(160, 2));
    expect(sent).toHaveLength(1);
    expect(Buffer.from(JSON.parse(sent[0]!.toString()).media.payload, 'base64')).toEqual(Buffer.concat([Buffer.alloc(160, 1), Buffer.alloc(160, 2)]));
    sender.frame(Buffer.alloc(160, 3));
    sender.drop();
    sender.flush();
    expect(sent).toHaveLength(1);
    sender.frame(Buffer.alloc(160, 4));
    sender.flush();
    expect(Buffer.from(JSON.parse(sent[1]!.toString()).media.payload, 'base64')).toEqual(Buffer.alloc(160, 4));
  });
});

describe("an outbound call's hangup_cause", () => {
  it.each([
    ['normal_clearing', 'completed'],
    ['user_busy', 'busy'],
    ['call_rejected', 'busy'],
    ['timeout', 'no-answer'],
    ['no_answer', 'no-answer'],
    ['originator_cancel', 'canceled'],
    ['not_found', 'failed'],
    ['unspecified', 'failed'],
    [undefined, 'failed'],
  ])('%s is %s', (cause, outcome) => {
    expect(hangupOutcome(cause)).toBe(outcome);
  });
});
