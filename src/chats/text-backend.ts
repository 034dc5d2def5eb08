/**
 * The text backend: the call controller with no audio, for chats. A line is "heard" whole the
 * moment it is written; a model turn is the pipeline's (`runModelTurn`), written instead of
 * spoken: the words before a tool round are a message of their own, before the tool's answer.
 */
import type { ProviderOverrides } from '../../engine/compile.js';
import type { RunModelCommand } from '../../engine/session.js';
import { defaultCatalog, findProvider, isRealtimeProvider } from '../../engine/catalog.js';
import type { LlmConfig } from '../../engine/schema.js';
import { ProviderError, type LlmProvider, type Providers } from '../providers/types.js';
import type { BackendContext, ConversationBackend, Heard, LineRequest } from '../calls/backend.js';
import { runModelTurn } from '../calls/model-turn.js';

/**
 * The text model a realtime assistant chats with: the same vendor's chat model (the realtime
 * vendors have no text-only session worth its cost). Prompts, messages and tools stay the same.
 */
export const REALTIME_TEXT_MODELS: Readonly<Record<string, { provider: string; model: string }>> = {
  'openai-realtime': { provider: 'openai', model: 'gpt-4o-mini' },
  'google-live': { provider: 'google', model: 'gemini-2.5-flash' },
  'sandbox-realtime': { provider: 'sandbox', model: 'sandbox' },
};

/** The model block a chat runs: a node's override or the assistant's, default model filled in. */
export function chatModelConfig(block: LlmConfig): LlmConfig {
  if (isRealtimeProvider(defaultCatalog, block.provider)) {
    const text = REALTIME_TEXT_MODELS[block.provider];
    if (text) return { ...block, ...text };
  }
  if (block.model !== undefined) return block;
  const provider = findProvider(defaultCatalog, 'llm', block.provider);
  return provider?.default_model ? { ...block, model: provider.default_model } : block;
}

export class TextBackend implements ConversationBackend {
  private overrides: ProviderOverrides = {};
  /** A chat says no lines of its own. */
  readonly ownLinesRecordedWhenAsked = false;
  /** Lines written and model turns running: the chat's turn is over when none is. */
  private pending = 0;
  /** Never aborted: a chat's turn is not cut; it ends with the request. */
  private readonly signal = new AbortController().signal;

  constructor(
    private readonly ctx: BackendContext,
    private readonly providers: Providers,
  ) {}

  async start(_node: unknown, overrides: ProviderOverrides): Promise<void> {
    this.overrides = overrides;
  }

  /** Text is read whole: the line is heard once the commands of its batch are carried out. */
  say(line: LineRequest, over: (heard: Heard) => void): void {
    this.track(Promise.resolve().then(() => over({ text: line.text, complete: true })), 'line');
  }

  reply(command: RunModelCommand): void {
    this.track(this.runModel(command), 'model run');
  }

  setOverrides(overrides: ProviderOverrides): void {
    this.overrides = overrides;
  }

  setNode(): void {}
  keyPressed(): void {}
  afterReply(apply: () => void): void {
    apply();
  }
  interrupt(): void {}
  callerAudio(): void {}

  busy(): boolean {
    return this.pending > 0;
  }

  async close(): Promise<void> {}

  private track(work: Promise<void>, where: string): void {
    this.pending++;
    this.ctx.guard(
      work.finally(() => {
        this.pending--;
        this.ctx.events.settled();
      }),
      where,
    );
  }

  private async runModel(command: RunModelCommand): Promise<void> {
    const events = this.ctx.events;
    const config = chatModelConfig(this.overrides.llm_config ?? this.ctx.assistant.llm_config);
    const provider: LlmProvider | undefined = this.providers.llm.get(config.provider);
    if (!provider) {
      events.failed(new ProviderError('PROVIDER_NO_ADAPTER', config.provider, `no llm adapter for "${config.provider}"`), config.provider);
      return;
    }
    let words = '';
    let pending = '';
    // the model's words before a tool round are a message of their own, before the tool's answer
    const flush = () => {
      const text = pending.trim();
      pending = '';
      if (text) events.wrote(text, command.node_id);
    };
    let transition: string | null;
    try {
      ({ transition } = await runModelTurn({
        provider,
        config,
        command,
        signal: this.signal,
        callTools: events.callTools,
        onText: (piece) => {
          words += piece;
          pending += piece;
        },
        onToolCalls: flush,
        onToolResult: (call, content) => events.toolResult(call.name, content, command.node_id),
      }));
    } catch (err) {
      flush();
      events.failed(err as Error, config.provider);
      return;
    }
    flush();
    if (words.trim()) events.replied(words.trim(), command.node_id, true);
    if (transition) events.choseTransition(transition, command.node_id);
  }
}
