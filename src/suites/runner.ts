/**
 * Runs a test suite (DECISIONS 20): the assistant and workflow resolved once (`RunPlan`), then
 * every test in parallel within the process's bounds (chat and voice tests have slots of their
 * own), each under its own timeout: a vendor that hangs fails its test, never the run. A test's
 * conversation (chat-test.ts, voice-test.ts) is followed by its end-state checks, the structured
 * data when expected, and the judge. The run's results are written as tests finish.
 */
import type { Logger } from 'pino';
import { effectiveAssistant, type EffectiveAssistant } from '../../engine/assistant.js';
import { callStartChecks } from '../../engine/checks.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { chatModelConfig } from '../chats/chat.js';
import type { ChatStore } from '../chats/store.js';
import { callErrorFrom, ErrorCodes } from '../errors.js';
import type { ProviderKeys } from '../providers/keys.js';
import type { Providers } from '../providers/types.js';
import type { Store } from '../store/index.js';
import type { WebhookService } from '../webhooks/service.js';
import { extractStructuredData, transcriptText } from '../webhooks/envelope.js';
import { runChatConversation } from './chat-test.js';
import { boundProviders, emptyView, type ConversationView, type Progress, type RunPlan, type TestContext } from './context.js';
import { endStateFailure, type EndState } from './expectations.js';
import { askModel, judgeTranscript } from './model.js';
import { testTimeoutSeconds, type SuiteTest } from './schema.js';
import type { TestResult, TestRun, TestSuite } from './store.js';
import { exchangeToolCalls, TestTools } from './tools.js';
import { voiceProblem } from './validate.js';
import { TestSuiteError } from './errors.js';

/** Runs a voice test's conversation over a real call path (voice-test.ts), when the server runs calls. */
export type VoiceConversation = (ctx: TestContext, progress: Progress) => Promise<void>;

export interface SuiteRunnerOptions {
  store: Store;
  providers: Providers;
  webhooks: Pick<WebhookService, 'callTools' | 'sendAsyncToolCalls'>;
  /** Where test chats are kept (the chats' own store). */
  chats: ChatStore;
  logger: Logger;
  /** Voice tests; without it they fail saying this server runs no calls. */
  voice?: VoiceConversation;
  /** Which providers need keys this server lacks (a test that needs one fails, as its chat or call would be refused). */
  keys?: ProviderKeys;
  /** Tests of each mode running at once in this process, across runs (default: 16 chat, 4 voice). */
  slots?: { chat?: number; voice?: number };
}

/** A counting semaphore: at most `size` at once, the others wait their turn in order. */
class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly size: number) {}

  async use<T>(work: () => Promise<T>): Promise<T> {
    if (this.used >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.used++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.used--;
    }
  }
}

/** Writes a run's results as they change, one write at a time, the last change always written. */
class RunWriter {
  private writing: Promise<void> | null = null;
  private dirty = false;
  constructor(
    private readonly write: () => Promise<void>,
    private readonly log: Logger,
  ) {}

  changed(): void {
    this.dirty = true;
    this.writing ??= this.drain();
  }

  private async drain(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      await this.write().catch((err: unknown) => this.log.warn({ err }, 'could not write a test run'));
    }
    this.writing = null;
  }

  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }
}

export const newResult = (test: Pick<SuiteTest, 'name' | 'mode'>): TestResult => ({
  name: test.name,
  mode: test.mode,
  status: 'pending',
  passed: null,
  failure: null,
  chat_id: null,
  call_id: null,
  transcript: [],
  nodes_visited: [],
  tool_calls: [],
  ended_reason: null,
  judge: null,
  structured_data: null,
  errors: [],
  caller_turns: 0,
  started_at: null,
  duration_ms: null,
});

/** Why a test stopped early: its own time was up, or the server is shutting down. */
type StopReason = 'timeout' | 'shutdown';

export class SuiteRunner {
  private readonly chatSlots: Slots;
  private readonly voiceSlots: Slots;
  private readonly runs = new Set<Promise<void>>();
  private readonly shutdown = new AbortController();
  private readonly log: Logger;

  constructor(private readonly o: SuiteRunnerOptions) {
    this.chatSlots = new Slots(o.slots?.chat ?? 16);
    this.voiceSlots = new Slots(o.slots?.voice ?? 4);
    this.log = o.logger.child({ component: 'test-suites' });
  }

  /**
   * Starts a run of the suite's tests (those named, else all): the run is written `running`
   * and returned at once; its tests go on in the background, their results written as they end.
   */
  async start(organizationId: string, suite: TestSuite, tests: SuiteTest[]): Promise<TestRun> {
    if (this.shutdown.signal.aborted) throw new TestSuiteError('TEST_SUITE_NO_RUNNER', 'The server is shutting down; run the suite again in a moment.');
    const results = tests.map(newResult);
    // the latest a run can end: every test one after another, each to its timeout, and the judge's slack
    const deadline = new Date(Date.now() + tests.reduce((s, t) => s + testTimeoutSeconds(t), 0) * 1000 + 60_000);
    const run = await this.o.store.testSuites.createRun(organizationId, suite.id, results, deadline);
    const work = this.execute(organizationId, suite, tests, run).catch((err: unknown) => this.log.error({ err, runId: run.id }, 'a test run failed'));
    this.runs.add(work);
    void work.finally(() => this.runs.delete(work));
    return structuredClone(run);
  }

  /** Stops every test under way (each fails saying the server shut down) and waits for the runs' last writes. */
  async close(): Promise<void> {
    this.shutdown.abort('shutdown' satisfies StopReason);
    await Promise.allSettled([...this.runs]);
  }

  private async execute(organizationId: string, suite: TestSuite, tests: SuiteTest[], run: TestRun): Promise<void> {
    const log = this.log.child({ runId: run.id, suiteId: suite.id });
    const writer = new RunWriter(() => this.o.store.testSuites.saveRun(run), log);
    const started = Date.now();
    const planned = await this.plan(organizationId, suite).catch((err: unknown) => ({ error: `the run could not start: ${(err as Error).message}` }));
    if ('error' in planned) {
      for (const result of run.results) Object.assign(result, { status: 'failed', passed: false, failure: planned.error, duration_ms: 0 });
    } else {
      await Promise.all(
        tests.map((test, i) =>
          (test.mode === 'voice' ? this.voiceSlots : this.chatSlots).use(() => this.runTest(planned, test, run.results[i]!, () => writer.changed())),
        ),
      );
    }
    run.status = run.results.every((r) => r.passed) ? 'passed' : 'failed';
    run.ended_at = new Date().toISOString();
    writer.changed();
    await writer.flush();
    const failed = run.results.filter((r) => !r.passed).length;
    log.info({ tests: run.results.length, failed, durationMs: Date.now() - started }, 'test run over');
  }

  /** The assistant and workflow the tests run, and why their chats or calls would be refused. */
  async plan(organizationId: string, suite: TestSuite): Promise<RunPlan | { error: string }> {
    const [stored, workflow] = await Promise.all([
      this.o.store.assistants.get(organizationId, suite.assistant_id),
      suite.workflow_id ? this.o.store.workflows.get(organizationId, suite.workflow_id) : Promise.resolve(null),
    ]);
    if (!stored) return { error: `assistant_id: the suite's assistant ${suite.assistant_id} no longer exists` };
    if (suite.workflow_id && !workflow) return { error: `workflow_id: the suite's workflow ${suite.workflow_id} no longer exists` };
    const definition: WorkflowDefinition | null = workflow?.is_active ? workflow.definition : null;
    const assistant = effectiveAssistant(stored.fields);
    const checks = callStartChecks(stored.fields, definition).map((p) => `${p.message} (${p.code})`);
    const chat = [...checks];
    const chatModel = chatModelConfig(assistant.llm_config);
    if (!this.o.providers.llm.has(chatModel.provider)) chat.push(`llm_config.provider: no chat adapter for "${chatModel.provider}"`);
    for (const p of this.o.keys?.problems(stored.fields, definition, { chat: true }) ?? []) chat.push(`${p} (CALL_REJECTED_MISSING_PROVIDER_KEY)`);
    const voice = [...checks, ...this.missingAdapters(assistant)];
    for (const p of this.o.keys?.problems(stored.fields, definition) ?? []) voice.push(`${p} (CALL_REJECTED_MISSING_PROVIDER_KEY)`);
    const cannotSpeak = voiceProblem(assistant);
    if (cannotSpeak) voice.push(cannotSpeak);
    return {
      organizationId,
      suite,
      assistantId: stored.id,
      fields: stored.fields,
      assistant,
      workflowId: definition ? workflow!.id : null,
      workflowNote: workflow && !workflow.is_active ? `workflow ${workflow.id} is inactive; the assistant ran alone` : null,
      definition,
      model: chatModelConfig(suite.llm_config ?? assistant.llm_config),
      refused: { chat, voice },
    };
  }

  private missingAdapters(a: EffectiveAssistant): string[] {
    const p = this.o.providers;
    if (a.realtime) return p.realtime.has(a.llm_config.provider) ? [] : [`llm_config.provider: no realtime adapter for "${a.llm_config.provider}"`];
    const out: string[] = [];
    if (!p.llm.has(a.llm_config.provider)) out.push(`llm_config.provider: no adapter for "${a.llm_config.provider}"`);
    if (a.stt_config && !p.stt.has(a.stt_config.provider)) out.push(`stt_config.provider: no adapter for "${a.stt_config.provider}"`);
    if (a.tts_config && !p.tts.has(a.tts_config.provider)) out.push(`tts_config.provider: no adapter for "${a.tts_config.provider}"`);
    return out;
  }

  /** One test, to its result: the conversation, then the end state, the structured data and the judge, all within its timeout. */
  private async runTest(plan: RunPlan, test: SuiteTest, result: TestResult, changed: () => void): Promise<void> {
    const startedAt = Date.now();
    result.status = 'running';
    result.started_at = new Date(startedAt).toISOString();
    changed();
    const timeoutSeconds = testTimeoutSeconds(test);
    const own = new AbortController();
    const timer = setTimeout(() => own.abort('timeout' satisfies StopReason), timeoutSeconds * 1000);
    const signal = AbortSignal.any([own.signal, this.shutdown.signal]);
    // the conversation, its checks and the judge all stop when the signal goes; what they leave behind is not waited for
    const stopped = new Promise<never>((_, reject) => {
      const fail = () => reject(signal.reason);
      if (signal.aborted) fail();
      else signal.addEventListener('abort', fail, { once: true });
    });
    stopped.catch(() => undefined);
    const bounded = <T>(work: Promise<T>): Promise<T> => {
      work.catch(() => undefined);
      return Promise.race([work, stopped]);
    };

    const progress: Progress = { chat_id: null, call_id: null, view: emptyView, caller_turns: 0, failure: null };
    const log = this.log.child({ suiteId: plan.suite.id, test: test.name });
    const tools = new TestTools(test.tool_results, (calls, options) => {
      const id = progress.chat_id ?? progress.call_id ?? '';
      const type = test.mode === 'voice' ? 'test_call' : 'test_chat';
      return exchangeToolCalls(
        { store: this.o.store, webhooks: this.o.webhooks, logger: this.o.logger },
        { id, type, organization_id: plan.organizationId, assistant: plan.assistant },
        calls,
        options,
      );
    });
    const ctx: TestContext = { plan, test, signal, providers: boundProviders(this.o.providers, signal), tools, logger: log };

    let failure: string | null = null;
    let view: ConversationView = emptyView();
    let judge: TestResult['judge'] = null;
    let structured: EndState['structured_data'];
    try {
      const refused = test.mode === 'voice' ? plan.refused.voice : plan.refused.chat;
      if (refused.length > 0) {
        failure = `${test.mode === 'voice' ? 'the call' : 'the chat'} would be refused at start: ${refused.join('; ')}`;
      } else {
        await bounded(this.conversation(ctx, progress));
        view = progress.view();
        failure = progress.failure;
        const endState = (): EndState => ({
          ended_reason: view.ended_reason,
          nodes_visited: view.nodes_visited,
          tool_calls: tools.calls,
          transcript: view.transcript,
          ...(structured ? { structured_data: structured } : {}),
        });
        if (test.expect?.structured_data !== undefined) structured = await bounded(this.structuredData(plan, view, signal));
        if (!failure && test.expect) failure = endStateFailure(test.expect, endState());
        if (test.judge) {
          judge = await bounded(judgeTranscript(ctx.providers, plan.model, test.judge.rubric, view.transcript, signal)).catch((err: unknown) => {
            if (signal.aborted) throw err;
            return { passed: false, reason: `the judge failed: ${(err as Error).message}` };
          });
          if (!failure && !judge.passed) failure = `judge: ${judge.reason}`;
        }
      }
    } catch (err) {
      view = progress.view();
      if (signal.aborted) {
        failure =
          signal.reason === 'timeout'
            ? `timeout_seconds: the test did not finish within ${timeoutSeconds} s${progress.failure ? ` (before that: ${progress.failure})` : ''}`
            : 'the server shut down before the test finished';
      } else {
        failure = `the test could not run: ${(err as Error).message}`;
        view.errors.push(callErrorFrom(err, ErrorCodes.CALL_INTERNAL_ERROR));
        log.warn({ err }, 'a test could not run');
      }
    } finally {
      clearTimeout(timer);
      // whatever is still under way (a hung vendor) is let go
      if (!own.signal.aborted) own.abort('timeout' satisfies StopReason);
    }
    Object.assign(result, {
      status: failure ? 'failed' : 'passed',
      passed: !failure,
      failure,
      chat_id: progress.chat_id,
      call_id: progress.call_id,
      transcript: view.transcript,
      nodes_visited: view.nodes_visited,
      tool_calls: structuredClone(tools.calls),
      ended_reason: view.ended_reason,
      judge,
      structured_data: structured && 'data' in structured ? structured.data : null,
      errors: view.errors,
      caller_turns: progress.caller_turns,
      duration_ms: Date.now() - startedAt,
    } satisfies Partial<TestResult>);
    changed();
  }

  private conversation(ctx: TestContext, progress: Progress): Promise<void> {
    if (ctx.test.mode === 'chat') return runChatConversation(ctx, progress, this.o.chats);
    if (!this.o.voice) return Promise.reject(new Error('voice tests need a server that runs calls'));
    return this.o.voice(ctx, progress);
  }

  /** What the assistant's analysis plan extracts from the test's conversation, with its own model. */
  private async structuredData(plan: RunPlan, view: ConversationView, signal: AbortSignal): Promise<EndState['structured_data']> {
    const messages = view.transcript.filter((l) => l.role !== 'tool');
    const config = chatModelConfig(plan.assistant.llm_config);
    const analysis = await extractStructuredData({
      plan: plan.assistant.analysis_plan,
      messages,
      transcript: transcriptText(messages),
      complete: async (turns, { signal: own }) =>
        (await askModel(boundProviders(this.o.providers, signal), config, turns, [], AbortSignal.any([own, signal]))).text,
    });
    if (!analysis) return undefined;
    return analysis.structured_data_error !== undefined ? { error: analysis.structured_data_error } : { data: analysis.structured_data };
  }
}
