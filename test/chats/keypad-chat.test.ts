/**
 * A chat has no keypad (docs/keypad.md): an assistant with `builtin_tools: ["press_keys"]` is not
 * offered the function in a chat, so the sandbox model, which would press "2" on a call when
 * told "press 2", answers in words; no `Keys sent` line. Through a real listening server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realtimeSandboxAssistant, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
}, 120_000);
afterAll(async () => {
  await s?.close();
});

const kinds = [
  { kind: 'pipeline', assistant: sandboxAssistant({ llm_config: { provider: 'sandbox', builtin_tools: ['press_keys'] } }) },
  { kind: 'realtime', assistant: realtimeSandboxAssistant({ llm_config: { provider: 'sandbox-realtime', builtin_tools: ['press_keys'] } }) },
];

describe.each(kinds)('a chat with an assistant that has the keypad ($kind)', ({ assistant }) => {
  it('is not offered press_keys: the model answers in words, nothing says keys were sent', async () => {
    const created = await s.api('POST', '/chats', { assistant_id: await s.createAssistant(assistant) });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const turn = await s.api('POST', `/chats/${created.json.chat.id}/messages`, { text: 'For cards, press 2.' });
    expect(turn.status, JSON.stringify(turn.json)).toBe(200);
    expect(turn.json.reply.map((m: { content: string }) => m.content)).toEqual(['Okay, I understand: For cards, press 2.']);
    expect(turn.json.chat.messages.some((m: { content: string }) => m.content.startsWith('Keys sent'))).toBe(false);
  });
});
