/**
 * Web calls (DECISIONS 14, docs/web-calls.md): POST /calls/web, then a browser-like client on the
 * stream with 16 kHz PCM both ways. The same pipeline, engine, webhooks and report as a phone call.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebCaller } from '../../src/sim/web-caller.js';
import { eventually, frontDeskWorkflow, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';

let server: CallingServer;
beforeAll(async () => {
  server = await startCallingServer();
});
afterAll(async () => {
  await server?.close();
});

const newAssistant = (extra: Record<string, unknown> = {}) => server.createAssistant(sandboxAssistant(extra));
const newWorkflow = (definition: unknown) => server.createWorkflow(definition, 'Web flow');

describe('web calls', () => {
  it('runs a workflow from greeting to end node, with transcript, nodes, latency and the report', async () => {
    const assistantId = await newAssistant();
    const workflowId = await newWorkflow(frontDeskWorkflow({ goodbyeFromGreeting: true }));
    const caller = new WebCaller({ baseUrl: server.baseUrl, apiKey: server.key });
    const callId = await caller.start({ assistant_id: assistantId, workflow_id: workflowId });
    const started = await caller.event('started');
    expect(started).toMatchObject({ call: { id: callId, type: 'web_call' }, audio: { encoding: 'pcm16', sample_rate: 16000 } });
    await caller.hear(/Acme Dental/i);
    await caller.quiet();
    await caller.say('goodbye, I am finished');
    await caller.ended(30_000);
    const types = caller.events.map((e) => e.type);
    expect(types).toContain('turn');
    expect(types).toContain('latency');
    expect(types.at(-1)).toBe('ended');
    const latency = caller.events.find((e) => e.type === 'latency')!.latency as { total_ms: number; service_ms: number; provider_wait_ms: number };
    expect(latency.total_ms).toBeGreaterThan(0);
    expect(latency.service_ms + latency.provider_wait_ms).toBeCloseTo(latency.total_ms, 0);
    const nodes = caller.events.filter((e) => e.type === 'node').map((e) => e.node_id);
    expect(nodes[0]).toBe('greeting');
    expect(nodes.at(-1)).toBe('bye');
    const lines = caller.events.filter((e) => e.type === 'message').map((e) => (e.message as { role: string; content: string }));
    expect(lines.some((m) => m.role === 'user' && /goodbye/i.test(m.content))).toBe(true);
    expect(caller.events.at(-1)).toMatchObject({ ended_reason: 'assistant-ended-call' });

    const report = await eventually('the end-of-call-report', () =>
      receivedMessages(server.receiver, 'end-of-call-report').find((m) => m.call.id === callId),
    );
    expect(report.call.type).toBe('web_call');
    expect(report.phone_number).toBeNull();
    const got = await server.api('GET', `/calls/${callId}`);
    expect(got.json.call).toMatchObject({ type: 'web_call', transport: 'web', status: 'ended', ended_reason: 'assistant-ended-call', phone_number: null, customer: null });
    expect(got.json.call.nodes_visited.at(-1)).toBe('bye');
  });
});
