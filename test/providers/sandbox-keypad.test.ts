/**
 * The sandbox model and the keypad (docs/sandbox.md, "The keypad"): offered `press_keys`, it
 * presses what the caller's words ask for ("press 1") or what the system prompt names
 * (`press_keys(1w2#)`, once), never picks it by words shared with its description, and listens
 * (says nothing) after its result. Pipeline and realtime sandboxes alike.
 */
import { describe, expect, it } from 'vitest';
import { PRESS_KEYS_FUNCTION } from '../../src/calls/keypad.js';
import { createSandboxLlm, keysAskedFor } from '../../src/providers/sandbox/llm.js';
import { createSandboxRealtime } from '../../src/providers/sandbox/realtime.js';
import { synthesizeSandboxSpeech } from '../../src/providers/sandbox/tts.js';
import type { LlmEvent, LlmFunction, LlmMessage, RealtimeFunctionCall } from '../../src/providers/types.js';

const llm = createSandboxLlm();

async function collect(messages: LlmMessage[], tools: LlmFunction[]): Promise<LlmEvent[]> {
  const out: LlmEvent[] = [];
  for await (const e of llm.stream({ config: { provider: 'sandbox' }, messages, tools })) out.push(e);
  return out;
}
const calls = (events: LlmEvent[]) => events.flatMap((e) => (e.type === 'tool_calls' ? e.calls : []));
const text = (events: LlmEvent[]) => events.map((e) => (e.type === 'text' ? e.text : '')).join('');

const system: LlmMessage = { role: 'system', content: 'You call the bank for the customer.' };
const transitions: LlmFunction[] = [{ name: 'go_to_person', description: 'a person answered the phone' }];
const tools = [...transitions, PRESS_KEYS_FUNCTION];

describe('the sandbox model offered press_keys', () => {
  it('reads the keys after "press": digits, star, pound, hash, the words zero to nine; up to the end of the sentence', () => {
    expect(keysAskedFor('For sales, press 1. For support, press 2.')).toBe('1');
    expect(keysAskedFor('Please press one two and the pound key')).toBe('12');
    expect(keysAskedFor('press 4 5 2 1 #')).toBe('4521#');
    expect(keysAskedFor('Press star, then zero.')).toBe('*');
    expect(keysAskedFor('PRESS NINE hash')).toBe('9#');
    expect(keysAskedFor('I pressed nothing')).toBeNull();
    expect(keysAskedFor('press the button')).toBeNull();
    expect(keysAskedFor('no keys here')).toBeNull();
  });

  it('presses the keys the caller\'s words ask for, whatever else matches', async () => {
    const events = await collect([system, { role: 'user', content: 'If a person answered the phone press 0, otherwise press 9.' }], tools);
    expect(calls(events)).toEqual([{ id: expect.any(String), name: 'press_keys', arguments: '{"digits":"0"}' }]);
  });

  it('never picks it by words shared with its description', async () => {
    const events = await collect([system, { role: 'user', content: 'What keypad code or number should I enter in the menu?' }], tools);
    expect(calls(events)).toEqual([]);
    expect(text(events)).toMatch(/^Okay, I understand/);
  });

  it('presses keys the system prompt names with press_keys(…), once: not again once the history shows them sent', async () => {
    const prompt: LlmMessage = { role: 'system', content: 'At the start, press_keys("1w2#") to reach the card desk.' };
    expect(calls(await collect([prompt], tools))).toEqual([expect.objectContaining({ name: 'press_keys', arguments: '{"digits":"1w2#"}' })]);
    // a call's history carries its line for them
    const after = await collect([prompt, { role: 'assistant', content: 'Keys sent: 1w2#' }, { role: 'user', content: 'Hello, card services.' }], tools);
    expect(calls(after)).toEqual([]);
    // a realtime session's own history carries the call itself
    const called: LlmMessage = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', name: 'press_keys', arguments: '{"digits":"1w2#"}' }] };
    expect(calls(await collect([prompt, called, { role: 'tool', tool_call_id: 'c1', content: '{"sent":"1w2#"}' }, { role: 'user', content: 'Hello?' }], tools))).toEqual([]);
    // not offered: the prompt is only words
    expect(calls(await collect([prompt], transitions))).toEqual([]);
  });

  it('says nothing after the keys\' result (it listens), unless a transition shares words with it', async () => {
    const called: LlmMessage = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', name: 'press_keys', arguments: '{"digits":"1"}' }] };
    const result: LlmMessage = { role: 'tool', tool_call_id: 'c1', content: '{"sent":"1"}' };
    const events = await collect([system, { role: 'user', content: 'Press 1.' }, called, result], tools);
    expect(events).toEqual([expect.objectContaining({ type: 'done', finishReason: 'stop' })]);
    const sentEdge = [{ name: 'go_to_menu', description: 'the keys were sent' }, PRESS_KEYS_FUNCTION];
    expect(calls(await collect([system, called, result], sentEdge)).map((c) => c.name)).toEqual(['go_to_menu']);
  });
});

describe('the sandbox realtime model offered press_keys', () => {
  it('presses what the caller asks for, and listens after the result (a response with no audio)', async () => {
    const calls: RealtimeFunctionCall[] = [];
    let done = 0;
    const audio: Buffer[] = [];
    const rt = await createSandboxRealtime().connect(
      { provider: 'sandbox-realtime' },
      { instructions: 'You call the bank.', tools: [PRESS_KEYS_FUNCTION], turnDetection: { silenceDurationMs: 200 } },
      {
        onAudio: (a) => audio.push(a),
        onSpeechStarted: () => undefined,
        onFunctionCall: (c) => calls.push(c),
        onResponseDone: () => done++,
        onError: (err) => {
          throw err;
        },
      },
    );
    const speech = synthesizeSandboxSpeech('For balances press 3.');
    for (let i = 0; i < speech.length; i += 160) rt.sendAudio(speech.subarray(i, i + 160));
    for (let i = 0; i < 30; i++) rt.sendAudio(Buffer.alloc(160, 0xff));
    await waitFor(() => calls.length === 1 && done === 1);
    expect(calls[0]).toMatchObject({ name: 'press_keys', arguments: '{"digits":"3"}' });
    rt.sendFunctionResult(calls[0]!.callId, '{"sent":"3"}');
    await waitFor(() => done === 2);
    expect(audio).toEqual([]);
    await rt.close();
  });
});

async function waitFor(probe: () => boolean, ms = 3_000): Promise<void> {
  const until = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > until) throw new Error('not in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
