/**
 * The call controller's own commands, on the memory transport and the fake clock: a node's
 * provider overrides (the pipeline reopens its STT with the node's block; a realtime call keeps
 * its one model), and a call resumed from its saved engine (another process takes it over): the
 * node and its overrides carry on, nothing is said again, and the conversation goes on.
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls } from '../helpers/call-harness.js';

useFastCalls();

const GREETING = 'Hello, this is the front desk.';
const BONJOUR = 'Bonjour, je vous écoute.';

/** Greet; the model may move on to a node that listens in French. */
const frenchDesk = {
  version: 1,
  entry_node: 'greet',
  global_prompt: 'You are the front desk.',
  nodes: [
    { id: 'greet', type: 'conversation', first_line: GREETING, instructions: 'Ask how you can help.' },
    { id: 'french', type: 'conversation', first_line: BONJOUR, instructions: 'Help in French.', stt_config: { provider: 'deepgram', language: 'fr' } },
    { id: 'bye', type: 'end', first_line: 'Au revoir.' },
  ],
  edges: [
    { from: 'greet', to: 'french', description: 'the caller speaks French' },
    { from: 'french', to: 'bye', description: 'the caller is finished' },
  ],
};

describe('a node with provider overrides (pipeline)', () => {
  it('opens a speech-to-text session with the node\'s block, closes the one before, and goes on listening with it', async () => {
    const h = callHarness({ definition: frenchDesk });
    await h.start();
    await h.until('the greeting heard', () => h.heard().includes(GREETING));
    expect(h.stt.sessions).toHaveLength(1);
    h.llm.reply({ calls: [{ name: 'go_to_french' }] });
    await h.caller.say('Parlez-vous français?');
    await h.until('the French line heard', () => h.heard().includes(BONJOUR));
    expect(h.stt.sessions).toHaveLength(2);
    expect(h.stt.sessions[1]!.config).toMatchObject({ provider: 'deepgram', language: 'fr' });
    expect(h.stt.sessions[0]!.closed).toBe(true);
    // the caller is heard through the node's session now
    h.llm.reply({ text: 'Très bien.' });
    await h.caller.say('Merci beaucoup.');
    await h.until('the reply heard', () => h.heard().includes('Très bien.'));
    expect(h.messages().at(-2)).toEqual(['user', 'Merci beaucoup.']);
  });
});

describe('a call resumed from its saved engine', () => {
  it('carries on in the saved node with its overrides: nothing is said again, the next turn is answered there', async () => {
    const first = callHarness({ definition: frenchDesk });
    await first.start();
    await first.until('the greeting heard', () => first.heard().includes(GREETING));
    first.llm.reply({ calls: [{ name: 'go_to_french' }] });
    await first.caller.say('Parlez-vous français?');
    await first.until('the French line heard', () => first.heard().includes(BONJOUR));
    await first.advance(100);
    const saved = (await first.store.get(first.record.id))!.engine!;
    expect(saved).toMatchObject({ current_node: 'french' });
    await first.dispose();

    // another process takes the call over with the saved engine
    const second = callHarness({ definition: frenchDesk });
    await second.store.create(second.record);
    second.call.start(saved).catch((err: unknown) => second.call.fail(err, 'start'));
    await second.advance(50);
    expect(second.stt.sessions).toHaveLength(1);
    expect(second.stt.sessions[0]!.config).toMatchObject({ provider: 'deepgram', language: 'fr' });
    expect(second.transport.frames).toHaveLength(0);
    second.llm.reply({ text: 'Bien sûr.' });
    await second.caller.say('Pouvez-vous m\'aider?');
    await second.until('the reply heard', () => second.heard().includes('Bien sûr.'));
    expect(second.llm.asked(0).at(-1)).toEqual(['user', 'Pouvez-vous m\'aider?']);
    expect(second.llm.asked(0).some(([, content]) => content === BONJOUR)).toBe(true);
  });
});
