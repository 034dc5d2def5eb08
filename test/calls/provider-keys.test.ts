/**
 * Providers without their keys (issue "Ready for production", item 5): on a server with no
 * DEEPGRAM_API_KEY, OPENAI_API_KEY or ELEVENLABS_API_KEY, an assistant that needs them is saved
 * with `warnings` naming each, and every way in refuses its calls before pickup, failing closed
 * with the reasons in `errors`: a phone call (rejected in its TwiML, the report
 * `rejected-at-start`), a web call and a chat (400 with the details). The same assistant on a
 * server with the keys is accepted without warnings.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, frontDesk, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';

/** The sandbox receptionist, but with Deepgram for ears and ElevenLabs for a voice. */
const vendorAssistant = sandboxAssistant({
  stt_config: { provider: 'deepgram' },
  tts_config: { provider: 'elevenlabs', voice_id: '21m00Tcm4TlvDq8EPAAK' },
});

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
}, 120_000);
afterAll(async () => {
  await s?.close();
});

describe('an assistant whose providers need keys the server lacks', () => {
  it('is saved, with a warning for each key (POST and PATCH)', async () => {
    const created = await s.api('POST', '/assistants', vendorAssistant);
    expect(created.status).toBe(201);
    expect(created.json.warnings).toEqual([
      'stt_config.provider: provider "deepgram" needs DEEPGRAM_API_KEY, which is not set on this server',
      'tts_config.provider: provider "elevenlabs" needs ELEVENLABS_API_KEY, which is not set on this server',
    ]);
    const defaults = await s.api('POST', '/assistants', { name: 'All defaults', tts_config: { provider: 'openai', voice_id: 'alloy' } });
    expect(defaults.json.warnings).toEqual([
      'llm_config.provider: provider "openai" (the default model) needs OPENAI_API_KEY, which is not set on this server',
      'stt_config.provider: provider "deepgram" (the default transcriber) needs DEEPGRAM_API_KEY, which is not set on this server',
      'tts_config.provider: provider "openai" needs OPENAI_API_KEY, which is not set on this server',
    ]);
    const realtime = await s.api('POST', '/assistants', { name: 'Realtime', llm_config: { provider: 'openai-realtime' } });
    expect(realtime.json.warnings).toEqual([
      'llm_config.provider: provider "openai-realtime" needs OPENAI_API_KEY, which is not set on this server',
    ]);
    const patched = await s.api('PATCH', `/assistants/${created.json.assistant.id}`, { tts_config: { provider: 'sandbox', voice_id: 'sandbox' } });
    expect(patched.status).toBe(200);
    expect(patched.json.warnings).toEqual([expect.stringMatching(/^stt_config\.provider: provider "deepgram" needs DEEPGRAM_API_KEY/)]);
    const sandbox = await s.api('POST', '/assistants', sandboxAssistant());
    expect(sandbox.json.warnings).toEqual([]);
    // a read gives the same warnings, for the dashboard to show beside the fields
    const read = await s.api('GET', `/assistants/${created.json.assistant.id}`);
    expect(read.json.warnings).toEqual(patched.json.warnings);
    expect((await s.api('GET', `/assistants/${sandbox.json.assistant.id}`)).json.warnings).toEqual([]);
  });

  it('a phone call is refused before pickup, failing closed with the reasons', async () => {
    const { number } = await s.setUpNumber({ assistant: vendorAssistant, definition: frontDesk });
    const caller = s.caller(number);
    const outcome = await caller.dial();
    expect(outcome.kind).toBe('rejected');
    const report = await eventually('the report', () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.phone_number?.number === number));
    expect(report.ended_reason).toBe('rejected-at-start');
    expect(report.errors).toEqual([
      { code: 'CALL_REJECTED_MISSING_PROVIDER_KEY', message: 'CALL_REJECTED_MISSING_PROVIDER_KEY: stt_config.provider: provider "deepgram" needs DEEPGRAM_API_KEY, which is not set on this server' },
      { code: 'CALL_REJECTED_MISSING_PROVIDER_KEY', message: 'CALL_REJECTED_MISSING_PROVIDER_KEY: tts_config.provider: provider "elevenlabs" needs ELEVENLABS_API_KEY, which is not set on this server' },
    ]);
    const statuses = receivedMessages(s.receiver, 'status-update').filter((m) => m.call.id === report.call.id).map((m) => m.status);
    expect(statuses).not.toContain('in-progress');
  });

  it("a node's override that needs a key is named by its node", async () => {
    const definition = structuredClone(frontDesk) as { nodes: Record<string, unknown>[] };
    definition.nodes[1]!.tts_config = { provider: 'elevenlabs', voice_id: '21m00Tcm4TlvDq8EPAAK' };
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant(), definition });
    const outcome = await s.caller(number).dial();
    expect(outcome.kind).toBe('rejected');
    const report = await eventually('the report', () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.phone_number?.number === number));
    expect(report.errors).toEqual([
      { code: 'CALL_REJECTED_MISSING_PROVIDER_KEY', message: 'CALL_REJECTED_MISSING_PROVIDER_KEY: nodes[1] (booking).tts_config.provider: provider "elevenlabs" needs ELEVENLABS_API_KEY, which is not set on this server' },
    ]);
  });

  it('a web call and a chat are refused (400), nothing is made', async () => {
    const assistantId = await s.createAssistant(vendorAssistant);
    const web = await s.api('POST', '/calls/web', { assistant_id: assistantId });
    expect(web.status).toBe(400);
    expect(web.json.details).toEqual(expect.arrayContaining([expect.stringMatching(/DEEPGRAM_API_KEY/), expect.stringMatching(/ELEVENLABS_API_KEY/)]));

    const chatAssistant = await s.createAssistant(sandboxAssistant({ llm_config: { provider: 'openai', model: 'gpt-4o-mini' } }));
    const chat = await s.api('POST', '/chats', { assistant_id: chatAssistant });
    expect(chat.status).toBe(400);
    expect(chat.json.details).toEqual([
      'llm_config.provider: provider "openai" needs OPENAI_API_KEY, which is not set on this server (CALL_REJECTED_MISSING_PROVIDER_KEY)',
    ]);
    // the chat needs no voice or ears: Deepgram and ElevenLabs without keys do not stop it
    const vendorChat = await s.api('POST', '/chats', { assistant_id: assistantId });
    expect(vendorChat.status).toBe(201);
  });
});

describe('the same assistant on a server with the keys', () => {
  let keyed: CallingServer;
  beforeAll(async () => {
    keyed = await startCallingServer({ DEEPGRAM_API_KEY: 'dg-test', ELEVENLABS_API_KEY: 'el-test', OPENAI_API_KEY: 'sk-test' });
  }, 120_000);
  afterAll(async () => {
    await keyed?.close();
  });

  it('has no warnings, and its web call is made', async () => {
    const created = await keyed.api('POST', '/assistants', vendorAssistant);
    expect(created.json.warnings).toEqual([]);
    const web = await keyed.api('POST', '/calls/web', { assistant_id: created.json.assistant.id });
    expect(web.status).toBe(201);
  });
});
