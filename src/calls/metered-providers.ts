/**
 * A call's providers, metered: what each one used (caller audio seconds to the STT, the model's
 * tokens as its vendor counted them, characters to the TTS, a realtime model's audio both ways)
 * goes to the call's usage (src/observability/usage.ts), and with tracing on, each model request
 * and TTS session is an `llm` or `tts` span under the turn under way (src/observability/tracing.ts).
 * The backends use these adapters as any others.
 */
import { findProvider, defaultCatalog } from '../../engine/catalog.js';
import type { LlmEvent, LlmProvider, Providers, RealtimeProvider, SttProvider, TtsProvider } from '../providers/types.js';
import type { CallObserver } from '../observability/call-observer.js';
import { endSpan, startSpan, tracingEnabled } from '../observability/tracing.js';

type Kind = 'stt' | 'llm' | 'tts' | 'realtime';

/** The model a config block runs: its own, or its provider's default. */
function modelOf(kind: Kind, config: { provider: string; model?: string | undefined }): string | null {
  return config.model ?? findProvider(defaultCatalog, kind, config.provider)?.default_model ?? null;
}

export function meteredProviders(providers: Providers, observer: CallObserver): Providers {
  const wrap = <P>(map: Map<string, P>, metered: (p: P) => P) => new Map([...map].map(([id, p]) => [id, metered(p)]));
  return {
    stt: wrap(providers.stt, (p) => meteredStt(p, observer)),
    llm: wrap(providers.llm, (p) => meteredLlm(p, observer)),
    tts: wrap(providers.tts, (p) => meteredTts(p, observer)),
    realtime: wrap(providers.realtime, (p) => meteredRealtime(p, observer)),
  };
}

/** Caller audio sent, in seconds of μ-law 8 kHz. */
function meteredStt(provider: SttProvider, observer: CallObserver): SttProvider {
  return {
    id: provider.id,
    connect: async (config, events, signal) => {
      const session = await provider.connect(config, events, signal);
      const model = modelOf('stt', config);
      let bytes = 0;
      let counted = 0;
      const count = () => {
        observer.usage.stt(provider.id, model, (bytes - counted) / 8000);
        counted = bytes;
      };
      return withOverrides(session, {
        sendAudio: (mulaw: Buffer) => {
          bytes += mulaw.length;
          session.sendAudio(mulaw);
        },
        close: () => {
          count();
          return session.close();
        },
      });
    },
  };
}

function meteredLlm(provider: LlmProvider, observer: CallObserver): LlmProvider {
  return {
    id: provider.id,
    stream: (request) => meteredStream(provider.id, modelOf('llm', request.config), provider.stream(request), observer),
  };
}

async function* meteredStream(id: string, model: string | null, events: AsyncIterable<LlmEvent>, observer: CallObserver): AsyncIterable<LlmEvent> {
  const span = tracingEnabled() ? startSpan('llm', observer.parent(), { 'gen_ai.system': id, 'gen_ai.request.model': model ?? '' }) : null;
  const startedAt = performance.now();
  let firstToken: number | null = null;
  let failure: string | undefined;
  let usage: { inputTokens: number; outputTokens: number } | undefined;
  try {
    for await (const event of events) {
      if (firstToken === null && (event.type === 'text' || event.type === 'tool_calls')) firstToken = performance.now() - startedAt;
      if (event.type === 'done' && event.usage) {
        usage = event.usage;
        observer.usage.llm(id, model, event.usage.inputTokens, event.usage.outputTokens);
      }
      yield event;
    }
  } catch (err) {
    failure = (err as Error).message;
    throw err;
  } finally {
    endSpan(
      span,
      {
        ...(firstToken !== null ? { 'switchboard.llm.time_to_first_token_ms': firstToken } : {}),
        ...(usage ? { 'gen_ai.usage.input_tokens': usage.inputTokens, 'gen_ai.usage.output_tokens': usage.outputTokens } : {}),
      },
      failure,
    );
  }
}

/** Characters sent to the TTS; with tracing, a span from the session's request to its end. */
function meteredTts(provider: TtsProvider, observer: CallObserver): TtsProvider {
  return {
    id: provider.id,
    open: async (config, events, signal) => {
      const model = modelOf('tts', config);
      const span = tracingEnabled() ? startSpan('tts', observer.parent(), { 'switchboard.tts.provider': provider.id, 'switchboard.tts.model': model ?? '' }) : null;
      const startedAt = performance.now();
      let characters = 0;
      let firstAudio: number | null = null;
      let ended = false;
      const end = (error?: string) => {
        if (ended) return;
        ended = true;
        endSpan(span, { 'switchboard.tts.characters': characters, ...(firstAudio !== null ? { 'switchboard.tts.time_to_first_audio_ms': firstAudio } : {}) }, error);
      };
      let session;
      try {
        session = await provider.open(
          config,
          {
            onAudio: (mulaw) => {
              firstAudio ??= performance.now() - startedAt;
              events.onAudio(mulaw);
            },
            onDone: () => {
              end();
              events.onDone();
            },
            onError: (err) => {
              end(err.message);
              events.onError(err);
            },
          },
          signal,
        );
      } catch (err) {
        end((err as Error).message);
        throw err;
      }
      const s = session;
      return {
        sendText: (text) => {
          characters += text.length;
          observer.usage.tts(provider.id, model, text.length);
          s.sendText(text);
        },
        flush: () => s.flush(),
        end: () => s.end(),
        cancel: () => {
          end();
          s.cancel();
        },
      };
    },
  };
}

/** A realtime model's audio: what the caller said to it, and what it said. */
function meteredRealtime(provider: RealtimeProvider, observer: CallObserver): RealtimeProvider {
  return {
    id: provider.id,
    connect: async (config, options, events, signal) => {
      const model = modelOf('realtime', config);
      let inBytes = 0;
      let outBytes = 0;
      const session = await provider.connect(
        config,
        options,
        {
          ...events,
          onAudio: (mulaw, itemId) => {
            outBytes += mulaw.length;
            events.onAudio(mulaw, itemId);
          },
        },
        signal,
      );
      return withOverrides(session, {
        sendAudio: (mulaw: Buffer) => {
          inBytes += mulaw.length;
          session.sendAudio(mulaw);
        },
        close: () => {
          observer.usage.realtime(provider.id, model, inBytes / 8000, outBytes / 8000);
          inBytes = 0;
          outBytes = 0;
          return session.close();
        },
      });
    },
  };
}

/** `target` with some of its methods replaced; every other member is the target's own (bound to it). */
function withOverrides<T extends object>(target: T, overrides: Partial<T>): T {
  return new Proxy(target, {
    get(t, prop) {
      if (Object.prototype.hasOwnProperty.call(overrides, prop)) return (overrides as Record<PropertyKey, unknown>)[prop];
      const value = Reflect.get(t, prop, t);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(t) : value;
    },
  });
}
