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
import type { CallTransport } from './transport.js';

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
  const observe = transport.observe ? (event: Parameters<CallController<CallRecord>['observed']>[0]) => controller?.observed(event) : null;
  const ledger = new CallLedger(record, {
    store: deps.store,
    notifier: deps.notifier,
    log,
    ...(deps.onEnded ? { onEnded: deps.onEnded } : {}),
    onFailure: (err, where) => controller?.fail(err, where),
    ...(observe
      ? {
          onMessage: (message) => observe({ type: 'message', message }),
          onNode: (nodeId, visited) => observe({ type: 'node', node_id: nodeId, nodes_visited: visited }),
        }
      : {}),
  });
  // a far end that shows the call (a browser) gets each turn's figures as well
  const onTurnLatency = observe
    ? (latency: TurnLatency) => {
        deps.onTurnLatency?.(latency);
        observe({ type: 'latency', latency });
      }
    : deps.onTurnLatency;
  let audio: CallAudio | null = null;
  const turnClock = new TurnClock({
    callId: record.id,
    onTurnLatency,
    onTurnBegin: observe ? (nodeId) => observe({ type: 'turn', node_id: nodeId }) : undefined,
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
  const pacer = audio.pacer;
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
    callTools: (calls, options) => deps.notifier.toolCalls(record, calls, options),
    backend: (context) =>
      assistant.realtime
        ? new RealtimeBackend(context, { providers: deps.providers, pacer, turnClock, globalPrompt: definition.global_prompt ?? '' })
        : new PipelineBackend(context, { providers: deps.providers, pacer, turnClock }),
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
