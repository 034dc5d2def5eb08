/**
 * What one test runs with (its suite's plan, its own tools, its timeout's signal) and what it has
 * done so far (`Progress`: read when it finishes, and when its timeout cut it short).
 */
import type { Logger } from 'pino';
import type { AssistantFields, EffectiveAssistant } from '../../engine/assistant.js';
import type { LlmConfig, WorkflowDefinition } from '../../engine/schema.js';
import type { CallError } from '../errors.js';
import type { LlmProvider, Providers, RealtimeProvider, SttProvider, TtsProvider } from '../providers/types.js';
import type { SuiteTest } from './schema.js';
import type { TestSuite, TranscriptLine } from './store.js';
import type { TestTools } from './tools.js';

/** The suite as a run found it: the assistant and workflow resolved once, for every test. */
export interface RunPlan {
  organizationId: string;
  suite: TestSuite;
  assistantId: string;
  fields: AssistantFields;
  assistant: EffectiveAssistant;
  /** The workflow that runs: null when none is named, or the one named is inactive (the assistant alone). */
  workflowId: string | null;
  workflowNote: string | null;
  definition: WorkflowDefinition | null;
  /** The model that plays callers and judges. */
  model: LlmConfig;
  /** Why a chat (`chat`) or a call (`voice`) with this assistant would be refused at start; empty when it would not. */
  refused: { chat: string[]; voice: string[] };
}

/** The conversation as it is now. */
export interface ConversationView {
  transcript: TranscriptLine[];
  nodes_visited: string[];
  node_id: string | null;
  status: 'active' | 'ended';
  ended_reason: string | null;
  errors: CallError[];
}

export interface Progress {
  chat_id: string | null;
  call_id: string | null;
  view(): ConversationView;
  /** What the customer side said so far. */
  caller_turns: number;
  /** The first script expectation not met. */
  failure: string | null;
}

export interface TestContext {
  plan: RunPlan;
  test: SuiteTest;
  /** Aborted when the test's time is up (or the server shuts down): every provider request it makes ends. */
  signal: AbortSignal;
  /** The server's providers, each request bound to `signal`. */
  providers: Providers;
  tools: TestTools;
  logger: Logger;
}

export const emptyView = (): ConversationView => ({ transcript: [], nodes_visited: [], node_id: null, status: 'active', ended_reason: null, errors: [] });

const both = (own: AbortSignal | undefined, test: AbortSignal) => (own ? AbortSignal.any([own, test]) : test);

/**
 * The providers with every request, session and stream bound to the test's `signal` too: a
 * vendor that hangs is let go when the test's time is up, never holding the run.
 */
export function boundProviders(providers: Providers, signal: AbortSignal): Providers {
  const map = <P>(from: ReadonlyMap<string, P>, bind: (p: P) => P) => new Map([...from].map(([id, p]) => [id, bind(p)] as const));
  return {
    llm: map<LlmProvider>(providers.llm, (p) => ({ id: p.id, stream: (request) => p.stream({ ...request, signal: both(request.signal, signal) }) })),
    stt: map<SttProvider>(providers.stt, (p) => ({ id: p.id, connect: (config, events, own) => p.connect(config, events, both(own, signal)) })),
    tts: map<TtsProvider>(providers.tts, (p) => ({ id: p.id, open: (config, events, own) => p.open(config, events, both(own, signal)) })),
    realtime: map<RealtimeProvider>(providers.realtime, (p) => ({ id: p.id, connect: (config, options, events, own) => p.connect(config, options, events, both(own, signal)) })),
  };
}
