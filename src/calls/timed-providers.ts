/**
 * Where the turn clock (turn-clock.ts) hears of the providers: a call's adapters, wrapped, tell it
 * when the model was asked, its first token, when it had delivered what the first audio needs,
 * the turn's first TTS request and its first audio. The backends use these adapters as any
 * others and mark nothing; the rest of a turn comes from the conversation (the caller's turn
 * ended: `BackendEvents.turnEnded`) and the playout (the first audio of an utterance, the first
 * frame out). With nobody reading the figures the adapters are not wrapped.
 *
 * Every mark lands on the turn pending at that moment, once (TurnClock keeps the first): a model
 * run or TTS session for a turn the caller has moved on from marks nothing newer, since a newer
 * turn supersedes the run (pipeline) or the clock has dropped the turn (a caller who speaks again).
 */
import type { LlmEvent, LlmProvider, Providers, RealtimeEvents, RealtimeProvider, TtsProvider } from '../providers/types.js';
import type { TurnClock } from './turn-clock.js';

export function timedProviders(providers: Providers, clock: TurnClock): Providers {
  if (!clock.reporting) return providers;
  const wrap = <P>(map: Map<string, P>, timed: (p: P) => P) => new Map([...map].map(([id, p]) => [id, timed(p)]));
  return {
    stt: providers.stt,
    llm: wrap(providers.llm, (p) => timedLlm(p, clock)),
    tts: wrap(providers.tts, (p) => timedTts(p, clock)),
    realtime: wrap(providers.realtime, (p) => timedRealtime(p, clock)),
  };
}

/**
 * A model stream: its request, its first token (text or a function call), and the end of a
 * stream that called no function (the model said all it had to). A reply's first sentence is
 * what its first audio needs: that is the turn's first TTS request (below), which comes first.
 */
function timedLlm(provider: LlmProvider, clock: TurnClock): LlmProvider {
  return {
    id: provider.id,
    stream: (request) => {
      clock.modelRequested();
      return timedStream(provider.stream(request), clock);
    },
  };
}

/**
 * A stream that called a function is not the model's last word: the assistant's tools run and the
 * model is asked again, or the node it moved to speaks; the turn's first TTS request then marks
 * what the first audio waited for (a tool's answer counts as a provider's wait, not ours).
 */
async function* timedStream(events: AsyncIterable<LlmEvent>, clock: TurnClock): AsyncIterable<LlmEvent> {
  let calledFunctions = false;
  for await (const event of events) {
    if (event.type === 'text' || event.type === 'tool_calls') clock.firstToken();
    if (event.type === 'tool_calls') calledFunctions = true;
    if (event.type === 'done' && !calledFunctions) clock.modelReady();
    yield event;
  }
}

/** The turn's first TTS session: when it was asked (the model had the first sentence), and its first audio. */
function timedTts(provider: TtsProvider, clock: TurnClock): TtsProvider {
  return {
    id: provider.id,
    open: (config, events, signal) => {
      clock.modelReady();
      const turn = clock.ttsRequested();
      if (!turn) return provider.open(config, events, signal);
      return provider.open(
        config,
        {
          onAudio: (mulaw) => {
            clock.ttsFirstAudio(turn);
            events.onAudio(mulaw);
          },
          onDone: () => events.onDone(),
          onError: (err) => events.onError(err),
        },
        signal,
      );
    },
  };
}

/**
 * A realtime model asks itself for the reply when the caller stops (server VAD): the request is
 * then, its first event is the first token, and its first audio (the playout's) what the turn
 * waited for. A caller who speaks again drops the turn.
 */
function timedRealtime(provider: RealtimeProvider, clock: TurnClock): RealtimeProvider {
  return {
    id: provider.id,
    connect: (config, options, events, signal) => {
      let replyExpected = false;
      const firstEvent = () => {
        if (!replyExpected) return;
        replyExpected = false;
        clock.firstToken();
      };
      const timed: RealtimeEvents = {
        ...events,
        onSpeechStarted: () => {
          replyExpected = false;
          clock.cancel();
          events.onSpeechStarted();
        },
        onSpeechStopped: () => {
          // the backend ends the caller's turn (the clock begins it); the model is asked with it
          events.onSpeechStopped?.();
          clock.modelRequested();
          replyExpected = true;
        },
        onAudio: (mulaw, itemId) => {
          firstEvent();
          events.onAudio(mulaw, itemId);
        },
        onFunctionCall: (call) => {
          firstEvent();
          events.onFunctionCall(call);
        },
        onResponseDone: () => {
          firstEvent();
          events.onResponseDone?.();
        },
      };
      return provider.connect(config, options, timed, signal);
    },
  };
}
