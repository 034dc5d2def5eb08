/**
 * Recordings end to end (DECISIONS 13), for pipeline and realtime assistants alike: a call whose
 * assistant asks for recording consent is recorded into one stereo WAV, served by
 * `GET /calls/{id}/recording` and named in the end-of-call-report's `recording_url`. The test
 * reads the recording back through the sandbox STT: the left channel says what the caller said,
 * the right what the caller heard (the consent line, the greeting, the reply), and after a
 * barge-in the right channel stops where the caller stopped hearing. Calls without consent, and
 * with `gdpr_mode`, are not recorded. With RECORDINGS_S3_URL the same goes through a real
 * S3-compatible server (s3rver) on 127.0.0.1.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import S3rver from 's3rver';
import { linearToMulaw } from '../../src/audio/mulaw.js';
import { transcribe } from '../helpers/sandbox-ear.js';
import {
  callIdOf,
  callKinds,
  eventually,
  frontDesk,
  longGreeting,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  type CallingServer,
} from '../helpers/calls.js';

const consent = { recording_consent: { enabled: true, message: 'This call is recorded.' } };

/** The two channels of a stereo 16-bit WAV, as μ-law (what the sandbox STT reads). */
function channelsOf(wav: Buffer): { left: Buffer; right: Buffer; seconds: number } {
  expect(wav.toString('latin1', 0, 4)).toBe('RIFF');
  expect(wav.readUInt16LE(22)).toBe(2);
  expect(wav.readUInt32LE(24)).toBe(8000);
  expect(wav.readUInt16LE(34)).toBe(16);
  expect(wav.readUInt32LE(40)).toBe(wav.length - 44);
  const n = (wav.length - 44) / 4;
  const left = Buffer.alloc(n);
  const right = Buffer.alloc(n);
  for (let i = 0; i < n; i++) {
    left[i] = linearToMulaw(wav.readInt16LE(44 + i * 4));
    right[i] = linearToMulaw(wav.readInt16LE(46 + i * 4));
  }
  return { left, right, seconds: n / 8000 };
}


async function fetchRecording(s: CallingServer, callId: string) {
  const res = await fetch(`${s.baseUrl}/calls/${callId}/recording`, { headers: { authorization: `Bearer ${s.key}` } });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

/** A call: the consent line and greeting, one line from the caller, the reply, a hang-up. */
async function recordedCall(s: CallingServer, assistant: Record<string, unknown>) {
  const { number } = await s.setUpNumber({ assistant, definition: frontDesk });
  const caller = s.caller(number);
  const callId = callIdOf(await caller.dial());
  await caller.hear(/Acme Dental/i);
  await caller.quiet(400);
  await caller.say('I would like to book an appointment.');
  await caller.hear(/book your appointment/i);
  await caller.quiet(400);
  await caller.hangUp();
  const report = await eventually('the report', () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 20_000);
  return { callId, report, caller };
}

describe('recordings in DATA_DIR/recordings', () => {
  let s: CallingServer;
  beforeAll(async () => {
    s = await startCallingServer();
  }, 120_000);
  afterAll(async () => {
    await s?.close();
  });

  describe.each(callKinds)('a $kind call', ({ assistant }) => {
    it('is recorded as one stereo WAV: left the caller, right what the caller heard', async () => {
      const { callId, report } = await recordedCall(s, assistant(consent));
      expect(report.recording_url).toBe(`${s.config.PUBLIC_URL}/calls/${callId}/recording`);
      const call = await s.api('GET', `/calls/${callId}`);
      expect(call.json.call.recording_url).toBe(report.recording_url);

      const res = await fetchRecording(s, callId);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('audio/wav');
      expect(res.headers.get('content-disposition')).toBe(`attachment; filename="${callId}.wav"`);
      const { left, right, seconds } = channelsOf(res.body);
      expect(seconds).toBeGreaterThan(3);
      const heard = (await transcribe(right)).join(' | ');
      const said = (await transcribe(left)).join(' | ');
      expect(heard).toMatch(/This call is recorded\..*Hello, this is Acme Dental\..*book your appointment/);
      expect(said).toBe('I would like to book an appointment.');
      expect(said).not.toMatch(/Acme Dental/);

      // another organization's key does not find it, nor does anyone an unknown call's
      const other = await s.store.keys.createKey('Another organization');
      const foreign = await fetch(`${s.baseUrl}/calls/${callId}/recording`, { headers: { authorization: `Bearer ${other.key}` } });
      expect(foreign.status).toBe(404);
      expect((await fetchRecording(s, '00000000-0000-4000-8000-000000000000')).status).toBe(404);
    });
  });

  it('a barge-in: the right channel stops where the caller stopped hearing', async () => {
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant(consent), definition: longGreeting });
    const caller = s.caller(number);
    const callId = callIdOf(await caller.dial());
    await caller.hear(/everything about our practice/i);
    await caller.say('Sorry, I have to go, goodbye.');
    await eventually('a clear', () => caller.clears.length > 0 || undefined, 10_000);
    await caller.ended(20_000).catch(() => caller.hangUp());
    const report = await eventually('the report', () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 20_000);
    const heardByCaller = caller.heard.map((h) => h.text);
    const { right } = channelsOf((await fetchRecording(s, callId)).body);
    const inRecording = await transcribe(right);
    // the sentences of the long line the caller did not hear are not in the recording either
    expect(heardByCaller).not.toContain('Parking is free for patients.');
    expect(inRecording).not.toContain('Parking is free for patients.');
    for (const line of heardByCaller) expect(inRecording).toContain(line);
    expect(report.recording_url).toMatch(/\/recording$/);
  });

  it('no consent, no recording; gdpr_mode, no recording', async () => {
    for (const assistant of [sandboxAssistant(), sandboxAssistant({ ...consent, gdpr_mode: true })]) {
      // the greeting heard, then the caller hangs up: a call that would have been recorded from its start
      const { number } = await s.setUpNumber({ assistant, definition: frontDesk });
      const caller = s.caller(number);
      const callId = callIdOf(await caller.dial());
      await caller.hear(/Acme Dental/i);
      await caller.hangUp();
      const report = await eventually('the report', () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 20_000);
      expect(report.recording_url).toBeNull();
      const res = await fetchRecording(s, callId);
      expect(res.status).toBe(404);
      expect(JSON.parse(res.body.toString()).message).toMatch(/has no recording: it was not recorded/);
    }
  });
  // (another organization's call, and an unknown one: in the first case, on a recorded call of each kind)
});

describe('recordings in S3-compatible storage', () => {
  let s: CallingServer;
  let s3: S3rver;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-s3-'));
    s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: 'calls', configs: [] }] });
    const address = await s3.run();
    s = await startCallingServer({
      RECORDINGS_S3_URL: `s3://S3RVER:S3RVER@calls/recordings?endpoint=http://127.0.0.1:${address.port}&region=us-east-1`,
    });
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    await s3?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('a recorded call is uploaded, and GET /calls/{id}/recording streams it from the bucket', async () => {
    expect(s.runtime.recordings.kind).toBe('s3');
    const { callId, report } = await recordedCall(s, sandboxAssistant(consent));
    expect(report.recording_url).toBe(`${s.config.PUBLIC_URL}/calls/${callId}/recording`);
    const res = await fetchRecording(s, callId);
    expect(res.status).toBe(200);
    const heard = (await transcribe(channelsOf(res.body).right)).join(' | ');
    expect(heard).toMatch(/This call is recorded\..*Acme Dental/);
  });
});
