/**
 * A voice-mode test (DECISIONS 20): the conversation over a real call path. The call is the one a
 * phone call runs (`createCall`: the controller with the pipeline or realtime backend, the
 * assistant's STT, turn-taking and TTS, paced audio), on a line in memory (`TestLine`) whose far
 * end is a simulated caller (`MediaLeg`) that speaks with the sandbox voice and hears through the
 * sandbox STT, in real time. The call is a `test_call`: it sends no status-update, no report and no
 * e-mail; its tools are answered by the test; once over it is written to the call log.
 *
 * After each thing the caller says, the test waits for the assistant's turn to be over: the call
 * took the caller's turn, then no model request or tool call is under way, the call has nothing
 * queued or playing, and no audio has come for a moment (or the call has ended).
 */
import type { Logger } from 'pino';
import { builtInVariables, resolveVariables } from '../../engine/variables.js';
import type { ActiveCall } from '../calls/active-call.js';
import { createCall } from '../calls/call.js';
import { callLogEntry } from '../calls/call-log.js';
import type { CallNotifier } from '../calls/notifier.js';
import { MemoryCallStore, newCallRecord, type CallRecord } from '../calls/store.js';
import type { CallController } from '../calls/controller.js';
import type { Providers } from '../providers/types.js';
import { MediaLeg } from '../sim/media-leg.js';
import type { CallLogRepository } from '../store/calls.js';
import type { ConversationView, Progress, TestContext } from './context.js';
import { stepFailure } from './expectations.js';
import { nextCallerMove } from './model.js';
import { TestLine } from './test-line.js';
import { callerReadsVoice } from './validate.js';

export interface VoiceTestDeps {
  /** Where the test call is written once over (GET /calls/{id}). */
  callLog: Pick<CallLogRepository, 'upsert'>;
  logger: Logger;
}

/** No audio from the assistant for this long, and nothing under way: its turn is over (lines queued together follow at once). */
const QUIET_MS = 600;
/** After the caller's turn was taken and nothing is under way, the longest wait for a reply to start. */
const REPLY_GRACE_MS = 3_000;
/** The longest a call takes to start its opening lines. */
const OPENING_MS = 10_000;
/** The longest the caller's ear may take to read back what the call says it heard (its lines end with silence). */
const EAR_MS = 3_000;
const POLL_MS = 20;

/** Where a step starts: the caller's heard lines and the call's messages so far. */
interface Mark {
  heard: number;
  messages: number;
}

const flat = (text: string) => text.replace(/\s+/g, ' ').trim().toLowerCase();

function callView(record: CallRecord): ConversationView {
  return {
    transcript: record.messages
      .filter((m) => m.role === 'assistant' || m.role === 'user')
      .map((m) => ({ role: m.role as 'assistant' | 'user', content: m.content, node_id: m.node_id })),
    nodes_visited: [...record.nodes_visited],
    node_id: record.current_node,
    status: record.status === 'ended' ? 'ended' : 'active',
    ended_reason: record.ended_reason,
    errors: [...record.errors],
  };
}

/** Counts model requests under way (a turn is not over while the model is still answering). */
function countingLlm(providers: Providers, busy: { count: number }): Providers {
  const llm = new Map(
    [...providers.llm].map(([id, p]) => [
      id,
      {
        id: p.id,
        stream: (request: Parameters<typeof p.stream>[0]) =>
          (async function* () {
            busy.count++;
            try {
              yield* p.stream(request);
            } finally {
              busy.count--;
            }
          })(),
      },
    ]),
  );
  return { ...providers, llm };
}

export function voiceConversation(deps: VoiceTestDeps) {
  return async (ctx: TestContext, progress: Progress): Promise<void> => {
    const { plan, test, signal } = ctx;
    const record = newCallRecord({
      type: 'test_call',
      organization_id: plan.organizationId,
      number_id: null,
      phone_number: null,
      customer: null,
      transport: 'test',
      transport_ids: {},
    });
    const now = new Date();
    record.status = 'in-progress';
    record.started_at = now.toISOString();
    record.assistant_id = plan.assistantId;
    record.assistant = plan.assistant as unknown as Record<string, unknown>;
    record.workflow_id = plan.workflowId;
    record.workflow_note = plan.workflowNote;
    record.definition = plan.definition as unknown as Record<string, unknown> | null;
    if (test.variables) record.variables = { ...test.variables };
    record.variable_values = resolveVariables(
      builtInVariables({ businessName: plan.assistant.business_name, customer: null, phoneNumber: null, call: { id: record.id, type: record.type }, now }),
      record.variables,
    );
    progress.call_id = record.id;
    progress.view = () => callView(record);

    const busy = { count: 0 };
    const notifier: CallNotifier = {
      // a test call tells nobody: no status-update, no report (so no e-mail either)
      statusUpdate: async () => undefined,
      endOfCallReport: async () => undefined,
      toolCalls: async (_call, calls, options) => {
        busy.count++;
        try {
          return await ctx.tools.call(calls, options);
        } finally {
          busy.count--;
        }
      },
    };
    let ended!: () => void;
    const over = new Promise<void>((resolve) => (ended = resolve));
    const line = new TestLine();
    // the caller's turn was taken (the call began its turn clock, or wrote what the caller said)
    let turnsTaken = 0;
    line.onObservation((event) => {
      if (event.type === 'turn' || (event.type === 'message' && event.message.role === 'user')) turnsTaken++;
    });
    const call: ActiveCall = createCall(record, line.transport, {
      providers: countingLlm(ctx.providers, busy),
      notifier,
      store: new MemoryCallStore(),
      logger: ctx.logger,
      onEnded: () => ended(),
    });
    line.attach(call);
    const leg = new MediaLeg({ wire: 'rtp', accountSid: '', callSid: record.id });
    // createCall makes the controller: what it is still saying or doing is the call's own word on the turn
    const controller = call as unknown as Pick<CallController<CallRecord>, 'engineSession' | 'busy'>;
    const node = () => controller.engineSession()?.state().node_id ?? record.current_node;
    // what the caller heard: its ear's reading of the sandbox voice, else the call's own record of it
    const readsVoice = callerReadsVoice(plan.assistant);
    const mark = (): Mark => ({ heard: leg.heard.length, messages: record.messages.length });
    const saidSince = (from: Mark) => record.messages.slice(from.messages).filter((m) => m.role === 'assistant').map((m) => m.content);
    const heardSince = (from: Mark) => (readsVoice ? leg.heard.slice(from.heard).map((h) => h.text) : saidSince(from));
    /** The ear has read back every line the call says was heard since `from` (it finalizes a line once silence follows it). */
    const earCaughtUp = (from: Mark) => {
      const heard = flat(heardSince(from).join(' '));
      return saidSince(from).every((line) => heard.includes(flat(line)));
    };
    const lastAudio = () => leg.frameTimes[leg.frameTimes.length - 1] ?? 0;
    const done = () => call.isEnded() || leg.closed;

    /** Waits until the assistant's turn is over (see the file's comment) and the caller has heard it, or the call has ended. */
    const settle = async (afterTurns: number | null, from: Mark): Promise<void> => {
      await turnOver(afterTurns);
      const deadline = Date.now() + EAR_MS;
      while (readsVoice && !earCaughtUp(from) && Date.now() < deadline) {
        signal.throwIfAborted();
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    };
    const turnOver = async (afterTurns: number | null): Promise<void> => {
      const started = Date.now();
      const endpointing = (plan.assistant.speech_config.turn_taking.endpointing_max_delay ?? 3) * 1000;
      let idleSince: number | null = null;
      const audioBefore = lastAudio();
      for (;;) {
        signal.throwIfAborted();
        if (done()) return;
        const now = Date.now();
        const taken = afterTurns === null || turnsTaken > afterTurns;
        if (!taken) {
          // the call never took the caller's turn (it heard nothing it could use): nothing more comes
          if (now - started > endpointing + 3_000) return;
        } else {
          const replied = lastAudio() > audioBefore;
          const quiet = busy.count === 0 && !controller.busy() && now - lastAudio() >= QUIET_MS;
          if (quiet) idleSince ??= now;
          else idleSince = null;
          if (quiet && replied) return;
          const grace = afterTurns === null ? OPENING_MS : REPLY_GRACE_MS;
          if (quiet && idleSince !== null && now - idleSince >= grace) return;
        }
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    };

    try {
      await leg.connectRtp(line.link);
      call.start().catch((err: unknown) => call.fail(err, 'start'));
      await settle(null, { heard: 0, messages: 0 });
      let reply = heardSince({ heard: 0, messages: 0 });
      let turnTools = ctx.tools.since(0);
      if (test.script) {
        for (const [j, step] of test.script.entries()) {
          signal.throwIfAborted();
          const at = `script[${j}]`;
          if (step.say !== undefined) {
            if (done()) {
              progress.failure = `${at}.say: the call had ended (${record.ended_reason ?? 'ended'}) before this step`;
              break;
            }
            const heard = mark();
            const tools = ctx.tools.calls.length;
            const turns = turnsTaken;
            await leg.say(step.say);
            progress.caller_turns++;
            await settle(turns, heard);
            reply = heardSince(heard);
            turnTools = ctx.tools.since(tools);
          }
          const failure = stepFailure(step, at, {
            node_id: node(),
            status: done() ? 'ended' : 'active',
            ended_reason: record.ended_reason,
            reply,
            tools: turnTools,
          });
          if (failure) {
            progress.failure = failure;
            break;
          }
        }
      } else {
        const caller = test.caller!;
        while (!done() && progress.caller_turns < caller.max_turns) {
          signal.throwIfAborted();
          const move = await nextCallerMove(ctx.providers, plan.model, caller, callView(record).transcript, signal);
          if (move.kind === 'hang-up' || done()) break;
          const turns = turnsTaken;
          const from = mark();
          await leg.say(move.text);
          progress.caller_turns++;
          await settle(turns, from);
        }
      }
    } finally {
      // the test is over: the caller hangs up (a call the assistant ended is over already)
      if (!call.isEnded()) {
        await leg.hangUp().catch(() => undefined);
        if (!call.isEnded()) void call.terminate('customer-ended-call');
      }
      await Promise.race([over, new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
      await leg.close();
      await deps.callLog.upsert(callLogEntry(record)).catch((err: unknown) => deps.logger.warn({ err, callId: record.id }, 'could not log a test call'));
    }
  };
}
