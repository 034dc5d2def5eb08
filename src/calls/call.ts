/**
 * A phone or web call, put together: its record's assistant and workflow with the call's
 * `{{variables}}`, its logger, its conversation log (`CallLedger`), its turn clock, its audio path,
 * and the controller with the backend the assistant asks for (a realtime model, or the pipeline).
 */
import type { Logger } from 'pino';
import { conversationLogger } from '../logger.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import { applyVariablesToAssistant, applyVariablesToDefinition } from '../../engine/variables.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { Providers } from '../providers/types.js';
import type { ActiveCall } from './active-call.js';
import { CallAudio, type CallMedia } from './call-audio.js';
import { CallController } from './controller.js';
import { CallLedger } from './ledger.js';
import { shielded } from './shield.js';
import type { CallNotifier } from './notifier.js';
import { PipelineBackend } from './pipeline/backend.js';
import { RealtimeBackend } from './realtime/backend.js';
import type { CallRecord, CallStore } from './store.js';
import type { TurnLatency } from './latency.js';
import { TurnClock } from './turn-clock.js';
import { timedProviders } from './timed-providers.js';
import { meteredProviders } from './metered-providers.js';
import { CallObserver } from '../observability/call-observer.js';
import type { PriceTable } from '../observability/pricing.js';
import { tracedToolCalls } from '../observability/traced-tools.js';
import type { CallTransport } from './transport.js';
import { warmTransferKit } from './warm-transfer.js';
import type { ListenHub } from './listen.js';

export type { CallMedia } from './call-audio.js';

export interface CallDeps {
  providers: Providers;
  notifier: CallNotifier;
  store: CallStore;
  logger: Logger;
  onTurnLatency?(latency: TurnLatency): void;
  /** Called once the call has ended and everything is released. */
  onEnded?(call: CallRecord): void;
  /** What a call plays and keeps beside the conversation (DECISIONS 13); absent: neither. */
  media?: CallMedia;
  /** The organization's prices, for the call's cost (absent or failing: no cost). */
  pricing?(organizationId: string): Promise<PriceTable>;
  /** Listen-in (src/calls/listen.ts): the call is registered there from its start; absent: nobody can listen. */
  listen?: ListenHub;
}

/**
 * A call with no workflow runs the assistant alone: one conversation node, `first_message` first
 * (an outbound call: `speech_config.first_message_outbound`, or `first_message` when that is unset).
 */
export function assistantOnlyDefinition(assistant: EffectiveAssistant, outbound = false): WorkflowDefinition {
  const first = (outbound ? assistant.speech_config.first_message_outbound : null) ?? assistant.first_message;
  const system = (assistant.llm_config.messages ?? [])
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
  return {
    version: 1,
    entry_node: 'assistant',
    global_prompt: system,
    nodes: [
      {
        id: 'assistant',
        type: 'conversation',
        ...(first ? { first_line: first } : {}),
      },
    ],
    edges: [],
  };
}

/** The call on its transport, not started yet (`start()` once the far end's media is there). */
export function createCall(record: CallRecord, transport: CallTransport, deps: CallDeps): ActiveCall {
  // {{variables}} (DECISIONS 12): the record keeps the templates, the call says the values
  const values = record.variable_values ?? {};
  const assistant = applyVariablesToAssistant(record.assistant as unknown as EffectiveAssistant, values);
  const template = record.definition as unknown as WorkflowDefinition | null;
  const definition = template
    ? applyVariablesToDefinition(template, values)
    : assistantOnlyDefinition(assistant, record.type === 'outbound_phone_call');
  // with gdpr_mode the conversation fields of every line are censored (src/logger.ts)
  const bindings = assistant.realtime ? { realtime: true } : {};
  const log = conversationLogger(deps.logger.child({ callId: record.id, workflowId: record.workflow_id, ...bindings }), assistant.gdpr_mode);

  // the controller is made below; what the ledger, the clock and the pacer tell reaches it then
  let controller: CallController<CallRecord> | null = null;
  let audio: CallAudio | null = null;
  // listeners (POST /calls/{id}/listen) get a tap on the audio path while they listen, and the events a browser gets
  const listened = deps.listen?.register(record, (tap) => {
    if (audio) audio.listen = tap;
  });
  const observe =
    transport.observe || listened ? (event: Parameters<CallController<CallRecord>['observed']>[0]) => controller?.observed(event) : null;
  // its usage, turns, spans and cost (src/observability/)
  const observer = new CallObserver(record);
  const ledger = new CallLedger(record, {
    store: deps.store,
    notifier: deps.notifier,
    log,
    ...(deps.onEnded ? { onEnded: deps.onEnded } : {}),
    onFailure: (err, where) => controller?.fail(err, where),
    onClosing: async (r) => {
      const prices = deps.pricing ? await deps.pricing(r.organization_id).catch(() => null) : null;
      r.observed = observer.finish(r, prices);
    },
    ...(observe
      ? {
          onMessage: (message) => observe({ type: 'message', message }),
          onNode: (nodeId, visited) => observe({ type: 'node', node_id: nodeId, nodes_visited: visited }),
        }
      : {}),
  });
  // each turn's figures go to the call's record (turns), the runtime's metrics and a far end that
  // shows the call (a browser)
  const onTurnLatency = (latency: TurnLatency) => {
    observer.turnReported(latency);
    deps.onTurnLatency?.(latency);
    observe?.({ type: 'latency', latency });
  };
  const turnClock = new TurnClock({
    callId: record.id,
    onTurnLatency,
    onTurnBegin: (nodeId, at, detail) => {
      observer.turnBegan(nodeId, at, detail);
      observe?.({ type: 'turn', node_id: nodeId });
    },
    onTurnDropped: () => observer.turnDropped(),
    outbound: () => audio!.pacer.stats,
  });
  const onSpeechFrame = turnClock.reporting ? () => turnClock.frameSent() : undefined;
  audio = new CallAudio({
    callId: record.id,
    organizationId: record.organization_id,
    assistant,
    transport,
    media: deps.media,
    log,
    error: (entry) => ledger.error(entry),
    ...(onSpeechFrame ? { onSpeechFrame } : {}),
    shield: (sink) => shielded(sink, 'media out', (err, where) => controller?.fail(err, where)),
  });
  const playout = audio.playout;
  // the turn clock hears of the providers (wrapped), the conversation (a turn ended) and the playout
  // and what each uses is metered (and traced)
  const providers = meteredProviders(timedProviders(deps.providers, turnClock), observer);
  if (turnClock.reporting) {
    playout.listen({
      audioStarted: () => {
        turnClock.modelReady();
        turnClock.audioStarted();
      },
    });
  }
  controller = new CallController<CallRecord>({
    record,
    assistant,
    definition,
    log,
    conversation: ledger,
    openingLines: openingLines(record, assistant),
    transport,
    audio,
    timed: true,
    onTurnEnded: (nodeId, detail) => turnClock.begin(nodeId, undefined, detail),
    callTools: tracedToolCalls((calls, options) => deps.notifier.toolCalls(record, calls, options), observer),
    warmTransfer: warmTransferKit(assistant, deps.providers, record.phone_number?.number ?? null),
    ...(listened ? { onObserved: (event: Parameters<CallController<CallRecord>['observed']>[0]) => listened.observed(event) } : {}),
    backend: (context) =>
      assistant.realtime
        ? new RealtimeBackend(context, { providers, playout, globalPrompt: definition.global_prompt ?? '' })
        : new PipelineBackend(context, { providers, playout }),
  });
  return controller;
}

/**
 * Lines said before the workflow starts, none of them interruptible: the recording consent, and
 * on an outbound call with a workflow, `speech_config.first_message_outbound` (the assistant
 * speaks first; without a workflow it is the conversation's own first line).
 */
function openingLines(record: CallRecord, assistant: EffectiveAssistant): string[] {
  const lines: string[] = [];
  if (assistant.recording_consent.enabled) lines.push(assistant.recording_consent.message);
  const outboundFirst = assistant.speech_config.first_message_outbound;
  if (record.type === 'outbound_phone_call' && record.definition !== null && outboundFirst) lines.push(outboundFirst);
  return lines;
}
