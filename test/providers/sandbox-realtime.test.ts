import { describe, expect, it } from 'vitest';
import {
  ProviderError,
  type LlmFunction,
  type RealtimeEvents,
  type RealtimeFunctionCall,
  type RealtimeSessionOptions,
} from '../../src/providers/types.js';
import { createSandboxRealtime, synthesizeSandboxSpeech } from '../../src/providers/sandbox/index.js';
import { FskReceiver } from '../../src/providers/sandbox/modem.js';
import { SANDBOX_NOISE_REPLY, truncateText } from '../../src/providers/sandbox/realtime.js';
import { SANDBOX_CHECK_IN } from '../../src/providers/sandbox/llm.js';
import { SILENCE_CHECK_INSTRUCTION } from '../../engine/session.js';

const tick = () => new Promise((r) => setImmediate(r));
const silence = (ms: number) => Buffer.alloc(ms * 8, 0xff);
const immediates = () => process.getActiveResourcesInfo().filter((r) => r === 'Immediate').length;

function decode(audio: Buffer): string[] {
  const out: string[] = [];
  new FskReceiver({ onSync() {}, onVerified() {}, onReject() {}, onFrame: (p) => out.push(new TextDecoder().decode(p)) }).push(audio);
  return out;
}

const transitions: LlmFunction[] = [
  { name: 'go_to_billing', description: 'The caller has a question about a bill, an invoice or a payment.' },
  { name: 'go_to_support', description: 'The caller reports a technical problem.' },
];

async function connect(options: Partial<RealtimeSessionOptions> = {}) {
  const log: string[] = [];
  const audio = new Map<string, Buffer[]>();
  const calls: RealtimeFunctionCall[] = [];
  let responses = 0;
  let onResponse: (() => void) | undefined;
  const events: RealtimeEvents = {
    onAudio: (chunk, itemId) => {
      if (!audio.has(itemId)) log.push(`audio ${itemId}`);
      audio.set(itemId, [...(audio.get(itemId) ?? []), chunk]);
    },
    onSpeechStarted: () => log.push('speech-started'),
    onSpeechStopped: () => log.push('speech-stopped'),
    onTranscript: (role, text, final) => {
      if (final) log.push(`${role}: ${text}`);
    },
    onFunctionCall: (c) => {
      calls.push(c);
      log.push(`call ${c.name} ${c.arguments}`);
    },
    onResponseDone: () => {
      responses++;
      log.push('response-done');
      onResponse?.();
    },
    onError: (e) => log.push(`error ${e.code}`),
    onClose: () => log.push('close'),
  };
  const session = await createSandboxRealtime().connect(
    { provider: 'sandbox-realtime' },
    { instructions: 'You are the front desk.', tools: transitions, ...options },
    events,
  );
  const responseDone = () => new Promise<void>((r) => (onResponse = r));
  const heard = (itemId: string) => decode(Buffer.concat(audio.get(itemId) ?? []));
  return { session, log, calls, heard, responseDone, responses: () => responses };
}

describe('sandbox realtime', () => {
  it('caller audio → transcript → function call; the result → spoken answer tagged with its item', async () => {
    const { session, log, calls, heard, responseDone } = await connect();
    let done = responseDone();
    session.sendAudio(Buffer.concat([silence(100), synthesizeSandboxSpeech('I have a question about my invoice.')]));
    session.sendAudio(silence(600)); // the 500 ms default end of turn
    await done;
    expect(log).toEqual([
      'speech-started',
      'speech-stopped',
      'user: I have a question about my invoice.',
      'call go_to_billing {}',
      'response-done',
    ]);
    done = responseDone();
    session.sendFunctionResult(calls[0]!.callId, 'moved to billing');
    await done;
    expect(log.slice(5)).toEqual([
      'audio item_sandbox_2',
      'assistant: Thanks for waiting. The result is: moved to billing.',
      'response-done',
    ]);
    expect(heard('item_sandbox_2')).toEqual(['Thanks for waiting.', 'The result is: moved to billing.']);
    await session.close();
    expect(log.at(-1)).toBe('close');
  });

  it('a sound with no words, as OpenAI\'s server VAD: a turn with an empty transcript, answered unless a response is under way; forgetTurn drops the answer from its history', async () => {
    const { session, log, heard, responseDone } = await connect();
    expect(session.interruptsOnSpeech).toBe(false);
    const noise = (ms: number) => Buffer.from(Array.from({ length: ms * 8 }, (_, i) => (i % 2 === 0 ? 0x10 : 0x90)));
    let done = responseDone();
    session.sendAudio(Buffer.concat([silence(100), noise(300)]));
    session.sendAudio(silence(600));
    await done;
    expect(log).toEqual(['speech-started', 'speech-stopped', 'user: ', 'audio item_sandbox_1', `assistant: ${SANDBOX_NOISE_REPLY}`, 'response-done']);
    expect(heard('item_sandbox_1')).toEqual([SANDBOX_NOISE_REPLY]);
    session.forgetTurn!(['item_sandbox_1']);
    // the call goes on: the next turn is answered as before
    done = responseDone();
    session.sendAudio(Buffer.concat([synthesizeSandboxSpeech('I have a question about my invoice.'), silence(700)]));
    await done;
    expect(log).toContain('call go_to_billing {}');

    // a noise while a response plays: no second response (the vendor's create fails), and the one playing goes on
    const before = log.length;
    session.createResponse(`Say exactly: ${'This is a long answer. '.repeat(20)}`);
    while (!log.slice(before).some((l) => l.startsWith('audio'))) await tick();
    session.sendAudio(Buffer.concat([noise(200), silence(600)]));
    for (let i = 0; i < 20; i++) await tick();
    expect(log.slice(before).filter((l) => l === 'user: ')).toHaveLength(1);
    expect(log.slice(before).filter((l) => l.startsWith('audio'))).toHaveLength(1);
    await session.close();
  });

  it('"Say exactly: …" speaks the text verbatim; requests during a response wait their turn', async () => {
    const { session, log, heard, responseDone, responses } = await connect();
    const done = responseDone();
    session.createResponse('Say exactly: "Welcome to billing. How can I help?"');
    session.createResponse('Say exactly: Anything else?');
    await done;
    while (responses() < 2) await tick();
    expect(heard('item_sandbox_1')).toEqual(['Welcome to billing.', 'How can I help?']);
    expect(heard('item_sandbox_2')).toEqual(['Anything else?']);
    expect(log.filter((l) => l === 'response-done')).toHaveLength(2);
    await session.close();
  });

  it("a response's own tools and instructions: a silence check-in gets the check-in line, calling nothing", async () => {
    const { session, log, heard, responseDone } = await connect();
    let done = responseDone();
    session.sendAudio(Buffer.concat([synthesizeSandboxSpeech('I have a question about my invoice.'), silence(700)]));
    await done;
    expect(log).toContain('call go_to_billing {}');
    done = responseDone();
    session.createResponse(`You are the front desk.\n\n${SILENCE_CHECK_INSTRUCTION}`, { tools: [] });
    await done;
    expect(log.slice(-2)).toEqual([`assistant: ${SANDBOX_CHECK_IN}`, 'response-done']);
    expect(heard('item_sandbox_2')).toEqual(['Are you still with me?', 'Take your time.']);
    await session.close();
  });

  it('update() changes the tools the model sees', async () => {
    const { session, log, responseDone } = await connect();
    session.update({ tools: [{ name: 'go_to_goodbye', description: 'The caller says goodbye, bye' }] });
    const done = responseDone();
    session.sendAudio(Buffer.concat([synthesizeSandboxSpeech('Okay, bye then!'), silence(700)]));
    await done;
    expect(log).toContain('call go_to_goodbye {}');
    await session.close();
  });

  it('cancelResponse() stops the audio at once and reports the response done; close leaves nothing running', async () => {
    const before = immediates();
    const { session, log, heard, responses } = await connect();
    session.createResponse(`Say exactly: ${'This is a very long answer. '.repeat(30)}`);
    while (!log.some((l) => l.startsWith('audio'))) await tick();
    session.cancelResponse();
    const got = heard('item_sandbox_1').length;
    for (let i = 0; i < 20; i++) await tick();
    expect(heard('item_sandbox_1')).toHaveLength(got);
    expect(got).toBeLessThan(30);
    expect(responses()).toBe(1);
    expect(log.filter((l) => l.startsWith('assistant'))).toEqual([]);
    session.truncate('item_sandbox_1', 1200);
    await session.close();
    session.createResponse('Say exactly: after close');
    session.sendAudio(synthesizeSandboxSpeech('after close'));
    for (let i = 0; i < 5; i++) await tick();
    expect(log.at(-1)).toBe('close');
    expect(immediates()).toBe(before);
  });

  it('truncation keeps the words the caller heard', () => {
    expect(truncateText('one two three four', 1000, 1000)).toBe('one two three four');
    expect(truncateText('one two three four', 500, 1000)).toBe('one two');
    expect(truncateText('one two three four', 300, 1000)).toBe('one');
    expect(truncateText('one two three four', 400, 1000)).toBe('one two');
    expect(truncateText('one two three four', 0, 1000)).toBe('');
    expect(truncateText('one two three four', 100, 1000)).toBe('');
  });

  it('connect with an aborted signal fails with PROVIDER_ABORTED', async () => {
    const err = await createSandboxRealtime()
      .connect({ provider: 'sandbox-realtime' }, { instructions: '', tools: [] }, {} as RealtimeEvents, AbortSignal.abort())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: 'PROVIDER_ABORTED' });
    expect(createSandboxRealtime().id).toBe('sandbox-realtime');
  });
});
