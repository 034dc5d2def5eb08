/**
 * Sandbox speech-to-speech (provider `sandbox-realtime`): the sandbox STT, model and TTS behind
 * the realtime interface, offline and deterministic (and, like its parts, not intelligent).
 *
 * Caller audio goes to the sandbox STT; its speech start is the "server VAD" speech start; at
 * each end of turn (`speechFinal`) the caller's words join the conversation and a response is
 * created, as OpenAI's server VAD does. Like OpenAI's with `interrupt_response: false`, it never
 * cuts a response itself, and it answers a sound with no words too (an empty transcript, then
 * "Sorry, I did not catch that.", unless a response is under way): the call decides both. A response is either function calls or sandbox speech
 * tagged with an item id. `createResponse('Say exactly: …')` speaks that text verbatim (how a
 * call speaks a node's first line); other instructions join the system prompt for that response,
 * and its `tools` (if given) replace the session's for it, so a silence check-in (Switchboard's
 * check-in instruction, no functions) gets the sandbox model's check-in line. `truncate` keeps
 * the share of the item's text that matches the share of its audio that was played.
 */
import type { LlmConfig } from '../../../engine/schema.js';
import {
  ProviderError,
  type LlmFunction,
  type LlmMessage,
  type LlmToolCall,
  type RealtimeEvents,
  type RealtimeProvider,
  type RealtimeSession,
  type RealtimeSessionOptions,
  type Transcript,
  type TtsSession,
} from '../types.js';
import { SilenceDetector } from '../../audio/silence.js';
import { createSandboxLlm } from './llm.js';
import { declareProvider } from '../declare.js';
import { SandboxSttSession } from './stt.js';
import { createSandboxTts, sandboxSpeechBytes } from './tts.js';

const PROVIDER = 'sandbox-realtime';

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'realtime',
    description:
      'Offline speech-to-speech stand-in built from the sandbox STT, model and TTS (demo and tests).',
    models: ['sandbox'],
    default_model: 'sandbox',
    voices: ['sandbox'],
    default_voice: 'sandbox',
  },
  account: null,
  needs: 'nothing',
  create: () => createSandboxRealtime(),
});
const DEFAULT_SILENCE_MS = 500;
const LEVEL_FRAME_BYTES = 160;
/** What it answers to a sound with no words (server VAD answers every turn). */
export const SANDBOX_NOISE_REPLY = 'Sorry, I did not catch that.';
const SAY_EXACTLY = /^\s*say exactly(?: this)?\s*[:\-–—]?\s*(.+?)\s*$/is;

interface Item {
  message: { role: 'assistant'; content: string | null };
  text: string;
  audioMs: number;
}

/** What a response was asked with. */
interface ResponseRequest {
  instructions?: string | undefined;
  tools?: LlmFunction[] | undefined;
}

interface Response {
  id: string;
  abort: AbortController;
  tts: TtsSession | null;
}

/** The text the caller heard of `text` when `heardMs` of its `totalMs` were played (whole words). */
export function truncateText(text: string, heardMs: number, totalMs: number): string {
  if (totalMs <= 0 || heardMs >= totalMs) return text;
  if (heardMs <= 0) return '';
  const cut = Math.floor((text.length * heardMs) / totalMs);
  const head = text.slice(0, cut);
  const space = head.lastIndexOf(' ');
  return (text[cut] === ' ' || cut === text.length ? head : space > 0 ? head.slice(0, space) : '').trimEnd();
}

class SandboxRealtimeSession implements RealtimeSession {
  private options: RealtimeSessionOptions;
  private readonly history: LlmMessage[] = [];
  private readonly stt: SandboxSttSession;
  private readonly llm = createSandboxLlm();
  private readonly tts = createSandboxTts();
  private readonly items = new Map<string, Item>();
  private active: Response | null = null;
  private readonly waiting: ResponseRequest[] = [];
  private userFinals: string[] = [];
  private counter = 0;
  private closed = false;
  /** The level of the caller's audio, as the STT measures it: where a sound with no words ends. */
  private readonly level: SilenceDetector;
  /** Modem frames the STT had read when the caller's current sound began (none more: no words). */
  private framesAtSound = 0;
  readonly interruptsOnSpeech = false;

  get responding(): boolean {
    return this.active !== null;
  }

  constructor(
    options: RealtimeSessionOptions,
    private readonly events: RealtimeEvents,
  ) {
    this.options = { ...options, tools: [...options.tools] };
    const endpointing = options.turnDetection?.silenceDurationMs ?? DEFAULT_SILENCE_MS;
    this.level = new SilenceDetector({ thresholdDb: -45, minSilenceMs: endpointing });
    this.stt = new SandboxSttSession(
      { provider: 'sandbox', endpointing },
      {
        onTranscript: (t) => this.onUserTranscript(t),
        onSpeechStarted: () => this.events.onSpeechStarted(),
        onError: (err) => this.events.onError(err),
      },
    );
  }

  sendAudio(mulaw: Buffer): void {
    if (this.closed) return;
    const framesBefore = this.stt.stats.frames;
    this.stt.sendAudio(mulaw);
    // measured in 20 ms frames, as the STT measures it
    for (let at = 0; at < mulaw.length; at += LEVEL_FRAME_BYTES) {
      const state = this.level.push(mulaw.subarray(at, at + LEVEL_FRAME_BYTES));
      if (state.started) this.framesAtSound = framesBefore;
      if (state.ended && this.stt.stats.frames === this.framesAtSound && !this.stt.hearing) {
        // after the STT's events of the same audio (its speech start), as from a socket
        queueMicrotask(() => {
          if (!this.closed) this.noiseEnded();
        });
      }
    }
  }

  /** A sound with no words ended: the turn is over, with an empty transcript, and answered (when nothing else is). */
  private noiseEnded(): void {
    this.events.onSpeechStopped?.();
    this.events.onTranscript?.('user', '', true);
    if (!this.active) void this.respond({ instructions: `Say exactly: "${SANDBOX_NOISE_REPLY}"` });
  }

  forgetTurn(itemIds: string[]): void {
    for (const id of itemIds) {
      const item = this.items.get(id);
      const at = item ? this.history.indexOf(item.message) : -1;
      if (at >= 0) this.history.splice(at, 1);
    }
  }

  update(options: Partial<RealtimeSessionOptions>): void {
    this.options = { ...this.options, ...options, tools: [...(options.tools ?? this.options.tools)] };
  }

  createResponse(instructions?: string, options?: { tools?: LlmFunction[] }): void {
    if (this.closed) return;
    const request = { instructions, tools: options?.tools };
    if (this.active) {
      this.waiting.push(request);
      return;
    }
    void this.respond(request);
  }

  cancelResponse(): void {
    const r = this.active;
    if (!r) return;
    this.waiting.length = 0;
    this.stop(r);
    // Like `response.done` with status `cancelled`: after the call returns, never re-entrantly.
    queueMicrotask(() => {
      if (!this.closed) this.events.onResponseDone?.();
    });
  }

  truncate(itemId: string, audioEndMs: number): void {
    const item = this.items.get(itemId);
    if (!item) return;
    const heard = truncateText(item.text, audioEndMs, item.audioMs);
    item.message.content = heard;
    item.text = heard;
    item.audioMs = Math.min(item.audioMs, Math.max(0, audioEndMs));
  }

  sendFunctionResult(callId: string, output: string, respond = true): void {
    if (this.closed) return;
    this.history.push({ role: 'tool', tool_call_id: callId, content: output });
    if (respond) this.createResponse();
  }

  addMessage(role: 'system' | 'user', text: string): void {
    if (!this.closed) this.history.push({ role, content: text });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.waiting.length = 0;
    if (this.active) this.stop(this.active);
    await this.stt.close();
    this.events.onClose?.();
  }

  private stop(r: Response): void {
    r.abort.abort();
    r.tts?.cancel();
    if (this.active === r) this.active = null;
  }

  private onUserTranscript(t: Transcript): void {
    if (this.closed) return;
    if (!t.isFinal) {
      this.events.onTranscript?.('user', [...this.userFinals, t.text].join(' '), false);
      return;
    }
    this.userFinals.push(t.text);
    if (!t.speechFinal) return;
    const text = this.userFinals.join(' ');
    this.userFinals = [];
    this.history.push({ role: 'user', content: text });
    this.events.onSpeechStopped?.();
    this.events.onTranscript?.('user', text, true);
    // as server VAD: no second response while one is under way (the call asks for it after)
    if (!this.active) this.createResponse();
  }

  private async respond({ instructions, tools }: ResponseRequest): Promise<void> {
    const r: Response = { id: `item_sandbox_${++this.counter}`, abort: new AbortController(), tts: null };
    this.active = r;
    try {
      const verbatim = instructions === undefined ? null : SAY_EXACTLY.exec(instructions);
      if (verbatim) {
        await this.speak(r, verbatim[1]!.replace(/^["“'](.*)["”']$/s, '$1'));
        return;
      }
      const system = [this.options.instructions, instructions].filter((s) => s && s.trim()).join('\n\n');
      const messages: LlmMessage[] = [{ role: 'system', content: system }, ...this.history];
      let text = '';
      let calls: LlmToolCall[] = [];
      for await (const event of this.llm.stream({
        config: { provider: 'sandbox' },
        messages,
        tools: tools ?? this.options.tools,
        signal: r.abort.signal,
      })) {
        if (event.type === 'text') text += event.text;
        else if (event.type === 'tool_calls') calls = event.calls;
      }
      if (this.active !== r) return;
      if (calls.length > 0) {
        const named = calls.map((c, i) => ({ ...c, id: `call_${r.id}_${i}` }));
        this.history.push({ role: 'assistant', content: null, tool_calls: named });
        for (const c of named) {
          if (this.active !== r) return;
          this.events.onFunctionCall({ callId: c.id, name: c.name, arguments: c.arguments });
        }
        if (this.active === r) this.finish(r);
        return;
      }
      // nothing to say (the model listens after pressing keys): a response with no output
      if (text === '') return this.finish(r);
      await this.speak(r, text);
    } catch (err) {
      if (this.active !== r) return; // cancelled or closed: not a failure
      this.active = null;
      this.events.onError(
        err instanceof ProviderError ? err : new ProviderError('PROVIDER_PROTOCOL', PROVIDER, String(err), undefined, { cause: err }),
      );
    }
  }

  /** Speaks `text` as item `r.id`, one frame per sentence; resolves when the audio is all out. */
  private async speak(r: Response, text: string): Promise<void> {
    const message: Item['message'] = { role: 'assistant', content: text };
    this.history.push(message);
    const sentences = text.split(/(?<=[.!?…])\s+/u).filter((s) => s.trim() !== '');
    const audioMs = sentences.reduce((ms, s) => ms + sandboxSpeechBytes(s.trim()) / 8, 0);
    this.items.set(r.id, { message, text, audioMs });
    await new Promise<void>((resolve, reject) => {
      const opened = this.tts.open(
        { provider: 'sandbox', voice_id: 'sandbox' },
        {
          onAudio: (chunk) => {
            if (this.active === r) this.events.onAudio(chunk, r.id);
          },
          onDone: () => resolve(),
          onError: (err) => reject(err),
        },
        r.abort.signal,
      );
      opened.then((tts) => {
        if (this.active !== r) return resolve();
        r.tts = tts;
        for (const s of sentences) {
          tts.sendText(s);
          tts.flush();
        }
        tts.end();
        // A cancel ends the session without onDone; settle the wait with it.
        r.abort.signal.addEventListener('abort', () => resolve(), { once: true });
      }, reject);
    });
    if (this.active !== r) return;
    this.events.onTranscript?.('assistant', this.items.get(r.id)!.text, true);
    if (this.active === r) this.finish(r);
  }

  private finish(r: Response): void {
    if (this.active === r) this.active = null;
    this.events.onResponseDone?.();
    // A response asked for meanwhile starts now (unless a handler above already started one).
    if (this.waiting.length > 0 && !this.active && !this.closed) void this.respond(this.waiting.shift()!);
  }
}

export function createSandboxRealtime(): RealtimeProvider {
  return {
    id: PROVIDER,
    async connect(_config: LlmConfig, options, events, signal) {
      if (signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', PROVIDER, 'connect aborted');
      return new SandboxRealtimeSession(options, events);
    },
  };
}
