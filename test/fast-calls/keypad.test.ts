/**
 * The keypad on the controller (DECISIONS 16, docs/keypad.md), on the memory transport and the
 * fake clock: `press_keys` offered only where `llm_config.builtin_tools` asks for it, the keys
 * heard at the far end as DTMF tones (read back by a Goertzel receiver) after what was said
 * before them, `Keys sent: …` in the transcript and the model's history, pauses, keys the model
 * may not press, a caller who speaks over the keys (they are not cut), a realtime model, and a
 * transport that sends keys its own way (SIP's RFC 4733 events).
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import { detectKeys, detectKeysMulaw } from '../helpers/dtmf.js';
import type { MemoryTransportOptions } from '../helpers/memory-transport.js';

useFastCalls();

const GREETING = 'Hello, calling the bank.';
const KEYPAD_LLM = { provider: 'sandbox', builtin_tools: ['press_keys'] };
const press = (digits: string) => ({ calls: [{ name: 'press_keys', arguments: { digits } }] });

function keypadCall(options: { transport?: MemoryTransportOptions; llm?: Record<string, unknown> } = {}): CallHarness {
  return callHarness({ assistant: { first_message: GREETING, llm_config: options.llm ?? KEYPAD_LLM }, ...(options.transport ? { transport: options.transport } : {}) });
}

/** The keys the far end heard (not dropped), with when each tone started (`now()` scale) and how long it lasted. */
function keysHeard(h: CallHarness): Array<{ key: string; at: number; ms: number }> {
  const frames = h.transport.frames.filter((f) => !f.dropped);
  return detectKeysMulaw(Buffer.concat(frames.map((f) => f.frame))).map((k) => {
    const sample = Math.round(k.startMs * 8);
    const frame = frames[Math.floor(sample / 160)]!;
    return { key: k.key, at: h.rel(frame.startsAt + (sample % 160) / 8), ms: k.endMs - k.startMs };
  });
}

async function greeted(h: CallHarness): Promise<void> {
  await h.start();
  await h.until('the greeting', () => h.heard().includes(GREETING));
}

describe('press_keys is offered', () => {
  it('not when the assistant\'s llm_config does not ask for it', async () => {
    const plain = callHarness({ assistant: { first_message: GREETING } });
    plain.llm.reply({ text: 'Sure.' });
    await greeted(plain);
    await plain.caller.say('Press one please.');
    await plain.until('the reply', () => plain.heard().includes('Sure.'));
    expect(plain.llm.requests[0]!.functions).not.toContain('press_keys');
  });

  it('when the assistant\'s llm_config asks for it (builtin_tools)', async () => {
    const keyed = keypadCall();
    keyed.llm.reply({ text: 'Sure.' });
    await greeted(keyed);
    await keyed.caller.say('Press one please.');
    await keyed.until('the reply', () => keyed.heard().includes('Sure.'));
    expect(keyed.llm.requests[0]!.functions).toEqual(['press_keys']);
  });

  it('in a node whose llm_config override asks for it, and not in the node after, which has none', async () => {
    const h = callHarness({
      definition: {
        version: 1,
        entry_node: 'menu',
        nodes: [
          { id: 'menu', type: 'conversation', first_line: GREETING, instructions: 'Find your way through the bank\'s menu.', llm_config: KEYPAD_LLM },
          { id: 'person', type: 'conversation', first_line: 'Hello, I am calling about my card.', instructions: 'Talk to the person.' },
          { id: 'bye', type: 'end', first_line: 'Goodbye.' },
        ],
        edges: [
          { from: 'menu', to: 'person', description: 'a person answered' },
          { from: 'person', to: 'bye', description: 'the conversation is over' },
        ],
      },
    });
    h.llm.reply({ calls: [{ name: 'go_to_person' }] }, { text: 'Thank you.' });
    await greeted(h);
    await h.caller.say('Hello, this is Anna speaking.');
    await h.until('the second node', () => h.heard().includes('Hello, I am calling about my card.'));
    await h.caller.say('How can I help you?');
    await h.until('the reply', () => h.heard().includes('Thank you.'));
    expect(h.llm.requests[0]!.functions).toEqual(['go_to_person', 'press_keys']);
    expect(h.llm.requests[1]!.functions).toEqual(['go_to_bye']);
  });
});

describe('keys pressed (pipeline)', () => {
  it('go to the far end as DTMF tones, 100 ms each with 100 ms between; the transcript and the model\'s history say so', async () => {
    const h = keypadCall();
    h.llm.reply(press('12#'), { text: 'Done.' }, { text: 'Fine.' });
    await greeted(h);
    await h.caller.say('For your account press one two and the pound key.');
    await h.until('the reply after the keys', () => h.heard().includes('Done.'));

    const keys = keysHeard(h);
    expect(keys.map((k) => k.key)).toEqual(['1', '2', '#']);
    for (const [i, k] of keys.entries()) {
      expect(k.ms).toBeGreaterThanOrEqual(95);
      expect(k.ms).toBeLessThanOrEqual(106);
      expect(k.at - keys[0]!.at).toBeCloseTo(i * 200, -1);
    }
    // the model's next words play after the keys and their last gap
    expect(h.heardAt('Done.')).toBeGreaterThanOrEqual(keys[2]!.at + 200);
    // the model was told, and its tool round went on
    expect(h.llm.requests[1]!.messages.at(-1)).toMatchObject({ role: 'tool', content: '{"sent":"12#"}' });
    expect(h.messages()).toEqual([
      ['assistant', GREETING],
      ['user', 'For your account press one two and the pound key.'],
      ['assistant', 'Keys sent: 12#'],
      ['assistant', 'Done.'],
    ]);
    // the next turn's history has them, in order
    await h.caller.say('Thank you.');
    await h.until('the next reply', () => h.heard().includes('Fine.'));
    expect(h.llm.asked(2).slice(-3)).toEqual([
      ['assistant', 'Keys sent: 12#'],
      ['assistant', 'Done.'],
      ['user', 'Thank you.'],
    ]);
  });

  it('w waits half a second between keys', async () => {
    const h = keypadCall();
    h.llm.reply(press('1w2'), { text: 'Done.' });
    await greeted(h);
    await h.caller.say('Press one, wait, then two.');
    await h.until('the reply after the keys', () => h.heard().includes('Done.'));
    const keys = keysHeard(h);
    expect(keys.map((k) => k.key)).toEqual(['1', '2']);
    expect(keys[1]!.at - keys[0]!.at).toBeCloseTo(700, -1);
    expect(h.messages()).toContainEqual(['assistant', 'Keys sent: 1w2']);
  });

  it('keys that cannot be pressed: the model is told which, nothing is sent, nothing is written', async () => {
    const h = keypadCall();
    h.llm.reply(press('12a'), { text: 'Sorry.' });
    await greeted(h);
    await h.caller.say('Press one two A.');
    await h.until('the reply', () => h.heard().includes('Sorry.'));
    expect(keysHeard(h)).toEqual([]);
    const told = h.llm.requests[1]!.messages.at(-1)!;
    expect(told.role).toBe('tool');
    expect(JSON.parse(told.content!)).toEqual({ error: expect.stringMatching(/"a" cannot be pressed; only 0-9, \*, # and w .* no key was sent/) });
    expect(h.messages().some(([, content]) => content.startsWith('Keys sent'))).toBe(false);
  });

  it('go after what the model said before them has been heard; the transcript keeps that order', async () => {
    const h = keypadCall();
    h.llm.reply({ text: 'Pressing one now.', ...press('1') }, { text: 'Done.' });
    await greeted(h);
    await h.caller.say('For sales press one.');
    await h.until('the reply after the keys', () => h.heard().includes('Done.'));
    const [key] = keysHeard(h);
    expect(key!.key).toBe('1');
    expect(key!.at).toBeGreaterThanOrEqual(h.heardAt('Pressing one now.'));
    expect(h.messages().slice(2)).toEqual([
      ['assistant', 'Pressing one now.'],
      ['assistant', 'Keys sent: 1'],
      ['assistant', 'Done.'],
    ]);
  });

  it('are not cut by a caller who speaks over them: they play whole, and the caller\'s turn comes after the reply', async () => {
    const h = keypadCall();
    h.llm.reply(press('123'), { text: 'Done.' }, { text: 'Yes, I am here.' });
    await greeted(h);
    await h.caller.say('Press one two three.');
    await h.until('the first key', () => keysHeard(h).length >= 1, 5_000, 5);
    await h.caller.say('Hello, are you still there?');
    await h.until('the answer to the caller', () => h.heard().includes('Yes, I am here.'));
    expect(keysHeard(h).map((k) => k.key)).toEqual(['1', '2', '3']);
    expect(h.transport.clears).toEqual([]);
    expect(h.messages().slice(2)).toEqual([
      ['assistant', 'Keys sent: 123'],
      ['assistant', 'Done.'],
      ['user', 'Hello, are you still there?'],
      ['assistant', 'Yes, I am here.'],
    ]);
  });

  it('a caller who hangs up during the keys ends the call; no line says they were sent', async () => {
    const h = keypadCall();
    h.llm.reply(press('123456789'));
    await greeted(h);
    await h.caller.say('Enter your card number.');
    await h.until('the first key', () => keysHeard(h).length >= 1, 5_000, 5);
    h.caller.hangUp();
    const report = await h.untilEnded(5_000);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.some((m) => m.content.startsWith('Keys sent'))).toBe(false);
  });
});

describe('keys pressed by a realtime model', () => {
  it('go to the far end after its audio; the function is answered and the model goes on', async () => {
    const h = callHarness({ kind: 'realtime', assistant: { first_message: GREETING, llm_config: { provider: 'sandbox-realtime', builtin_tools: ['press_keys'] } } });
    h.realtime.reply(press('45'), { text: 'Done.' });
    await greeted(h);
    expect(h.realtime.session!.options.tools.map((t) => t.name)).toEqual(['press_keys']);
    await h.caller.say('Press four five.');
    await h.until('the reply after the keys', () => h.heard().includes('Done.'));
    const keys = keysHeard(h);
    expect(keys.map((k) => k.key)).toEqual(['4', '5']);
    expect(h.heardAt('Done.')).toBeGreaterThanOrEqual(keys[1]!.at + 200);
    expect(h.realtime.session!.functionResults).toEqual([{ callId: expect.any(String), output: '{"sent":"45"}', respond: true }]);
    expect(h.messages()).toEqual([
      ['assistant', GREETING],
      ['user', 'Press four five.'],
      ['assistant', 'Keys sent: 45'],
      ['assistant', 'Done.'],
    ]);
  });

  it('is not offered press_keys without builtin_tools', async () => {
    const h = callHarness({ kind: 'realtime', assistant: { first_message: GREETING } });
    await greeted(h);
    expect(h.realtime.session!.options.tools).toEqual([]);
  });
});

describe('a transport in another format (the browser: 16-bit PCM at 16 kHz)', () => {
  it('hears the tones through the call\'s resampler', async () => {
    const h = keypadCall({ transport: { audioFormat: { encoding: 'pcm16', sampleRate: 16_000 } } });
    h.llm.reply(press('7*'), { text: 'Done.' });
    await h.start();
    await h.caller.say('Press seven and star.');
    await h.until('the keys written', () => h.messages().some(([, content]) => content === 'Keys sent: 7*'));
    const pcm = Buffer.concat(h.transport.frames.map((f) => f.frame));
    const samples = new Int16Array(pcm.length / 2).map((_, i) => pcm.readInt16LE(i * 2));
    const keys = detectKeys(samples, 16_000);
    expect(keys.map((k) => k.key)).toEqual(['7', '*']);
    expect(keys[1]!.startMs - keys[0]!.startMs).toBeCloseTo(200, -1);
  });
});

describe('a transport that sends keys its own way (SIP: RFC 4733)', () => {
  it('gets each key\'s frames in their slots instead of tones: durations growing to the end, the end twice more', async () => {
    const h = keypadCall({ transport: { sendsKeys: true } });
    h.llm.reply(press('1#'), { text: 'Done.' });
    await greeted(h);
    await h.caller.say('Press one and pound.');
    await h.until('the reply after the keys', () => h.heard().includes('Done.'));
    expect(keysHeard(h)).toEqual([]);
    const sent = h.transport.keyFrames;
    expect(sent.map((f) => `${f.key.key}${f.key.duration}${f.key.end ? 'E' : ''}${f.key.repeat || ''}`)).toEqual([
      '1160', '1320', '1480', '1640', '1800E', '1800E1', '1800E2',
      '#160', '#320', '#480', '#640', '#800E', '#800E1', '#800E2',
    ]);
    // one frame slot after another; the second key 200 ms after the first
    expect(sent[1]!.startsAt - sent[0]!.startsAt).toBe(20);
    expect(sent[7]!.startsAt - sent[0]!.startsAt).toBe(200);
    expect(h.messages()).toContainEqual(['assistant', 'Keys sent: 1#']);
  });
});
