/**
 * Google Gemini Live speech-to-speech over WebSocket (`BidiGenerateContent` of the Gemini API).
 *
 * Gemini Live takes PCM16 at 16 kHz and speaks PCM16 at 24 kHz: caller μ-law 8 kHz is decoded
 * and resampled up once, the model's audio resampled down once (one resampler per model turn,
 * flushed at its end) and encoded to μ-law. Its own VAD hears the caller; `interrupted` (or
 * `voiceActivity`) is the barge-in signal. What the protocol lacks, done as well as it allows
 * (docs/providers.md, "Google Gemini Live"):
 * - no `response.create`: a reply we ask for is a `clientContent` turn (`turnComplete: true`),
 *   one at a time (a client turn would interrupt the model's generation);
 * - no per-response tools: a `contextUpdate` swaps them for that turn and puts them back after;
 * - no cancel: the turn's remaining audio is dropped here;
 * - no truncation: the model is told in a `clientContent` note (no reply asked) what the caller
 *   heard of its reply, as far as its transcript goes (the call's record uses the playout);
 * - functions are `NON_BLOCKING`, so a result can be taken silently (`scheduling: SILENT`) or
 *   answered once the model is idle (`WHEN_IDLE`).
 * A connection lives about ten minutes: at `goAway` the session resumes on a new one with the
 * last `sessionResumptionUpdate` handle. The wire format is in `google-live-protocol.ts`.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { LlmConfig } from '../../../engine/schema.js';
import { mulawDecode, mulawEncode } from '../../audio/mulaw.js';
import { Resampler } from '../../audio/resample.js';
import { declareProvider, vendorEndpoint } from '../declare.js';
import { GOOGLE, responseObject } from '../llm/google.js';
import { ProviderError, type LlmFunction, type ProviderSettings, type RealtimeEvents, type RealtimeProvider, type RealtimeSession, type RealtimeSessionOptions } from '../types.js';
import {
  closeError,
  GOOGLE_LIVE_DEFAULT_MODEL,
  GOOGLE_LIVE_DEFAULT_VOICE,
  GOOGLE_LIVE_PROVIDER_ID,
  GOOGLE_LIVE_VOICES,
  heardPart,
  KNOWN_FIELDS,
  LIVE_INPUT_MIME,
  LIVE_INPUT_RATE,
  LIVE_OUTPUT_RATE,
  liveTools,
  liveUrl,
  PHONE_RATE,
  providerError,
  setupMessage,
  textContent,
  vendorMessage,
  type ServerContent,
  type ServerMessage,
} from './google-live-protocol.js';

export { GOOGLE_LIVE_DEFAULT_MODEL, GOOGLE_LIVE_DEFAULT_VOICE, GOOGLE_LIVE_PROVIDER_ID } from './google-live-protocol.js';

export const provider = declareProvider({
  catalog: {
    id: GOOGLE_LIVE_PROVIDER_ID,
    kind: 'realtime',
    description: 'Google Gemini Live speech-to-speech (BidiGenerateContent over WebSocket; PCM 16/24 kHz, converted).',
    models: [GOOGLE_LIVE_DEFAULT_MODEL, 'gemini-2.5-flash-native-audio-preview-09-2025'],
    default_model: GOOGLE_LIVE_DEFAULT_MODEL,
    voices: GOOGLE_LIVE_VOICES,
    default_voice: GOOGLE_LIVE_DEFAULT_VOICE,
  },
  account: GOOGLE,
  create: (settings) => createGoogleLive(settings),
});

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** How long close() waits for the server's close frame before dropping the socket. */
const CLOSE_GRACE_MS = 2_000;
/** Turns whose transcript and length are kept for `truncate`. */
const TURNS_REMEMBERED = 8;
/** No sign of the caller's speech for this long (no voiceActivity from the server): their turn is over. */
const CALLER_QUIET_MS = 2_000;
/** Our next turn waits for the model's to complete, but not past this long without a word from it. */
const BLOCKED_GIVE_UP_MS = 5_000;

export interface GoogleLiveOptions {
  /** Receives usage (`debug`) and ignored oddities (`warn`). No secrets. */
  logger?: Pick<Logger, 'debug' | 'warn'>;
  /** How long a turn of ours waits for a model that has gone quiet mid-turn (default 5 s). */
  blockedGiveUpMs?: number;
}

interface Turn {
  id: string;
  /** Dropped here (cancelled, interrupted): no more audio or transcript from it. */
  cancelled: boolean;
  resampler: Resampler | null;
  rate: number;
  /** An odd byte of PCM16 waiting for its pair. */
  odd: Buffer | null;
  transcript: string;
  /** μ-law bytes given to the owner. */
  mulawBytes: number;
  /** The session's functions go back after this turn (its own were swapped in). */
  restoreTools: boolean;
}

/** A reply we ask for: a client turn, with functions of its own (`[]`: none). */
interface Request {
  text: string | undefined;
  tools: LlmFunction[] | undefined;
}

export function createGoogleLive(settings: ProviderSettings, adapterOptions: GoogleLiveOptions = {}): RealtimeProvider {
  const log = adapterOptions.logger;
  const giveUpMs = adapterOptions.blockedGiveUpMs ?? BLOCKED_GIVE_UP_MS;
  return {
    id: GOOGLE_LIVE_PROVIDER_ID,

    connect(config: LlmConfig, options: RealtimeSessionOptions, events: RealtimeEvents, signal) {
      const { baseUrl, apiKey } = vendorEndpoint(settings, GOOGLE);
      if (!apiKey) return Promise.reject(providerError('PROVIDER_AUTH', 'GOOGLE_API_KEY is not configured'));
      if (signal?.aborted) return Promise.reject(providerError('PROVIDER_ABORTED', 'aborted before connecting'));
      const model = config.model ?? GOOGLE_LIVE_DEFAULT_MODEL;
      const timeoutMs = settings.timeouts?.connectMs ?? DEFAULT_CONNECT_TIMEOUT_MS;

      return new Promise<RealtimeSession>((resolve, reject) => {
        let ws!: WebSocket; // the connection in use
        let successor: WebSocket | null = null; // the session going on over a new connection (after goAway)
        let resumeHandle: string | null = null;
        let resumeTimer: NodeJS.Timeout | undefined;
        let lostWhileResuming: ProviderError | null = null; // the old connection closed before the new one was up
        let instructions = options.instructions;
        let connected = false;
        let settled = false;
        let closing = false;
        let closed = false;
        let connectTimer: NodeJS.Timeout | undefined;
        let closeTimer: NodeJS.Timeout | undefined;
        let closeWaiters: Array<() => void> = [];
        const upsampler = new Resampler(PHONE_RATE, LIVE_INPUT_RATE);
        let sessionTools = options.tools;
        let turn: Turn | null = null;
        let turnSeq = 0;
        const pastTurns = new Map<string, { transcript: string; ms: number }>();
        // our client turns, one at a time: a client turn sent while the model speaks interrupts it
        const queued: Request[] = [];
        let awaiting = false; // a reply we asked for has not started
        let cancelNext = false; // cancelled before the reply we asked for started
        let restoreAfterTurn = false; // the reply asked for has functions of its own
        let serverOpen = false; // the server's model turn is under way (until its turnComplete)
        let ourInterrupt = false; // a note of ours interrupts the model: not the caller's speech
        let heardActivity = false; // the server sends voiceActivity: caller speech comes from it
        let quietTimer: NodeJS.Timeout | undefined;
        let drainTimer: NodeJS.Timeout | undefined;
        let lastServerAt = performance.now();
        let callerSpeaking = false;
        let callerText = '';
        const callNames = new Map<string, string>(); // function call id → name (the response names it)
        const cancelledCalls = new Set<string>();

        const fail = (err: ProviderError) => {
          if (settled) return;
          settled = true;
          clearTimeout(connectTimer);
          signal?.removeEventListener('abort', onAbort);
          ws.removeAllListeners('message');
          ws.terminate();
          reject(err);
        };
        const onAbort = () => {
          if (!connected) fail(providerError('PROVIDER_ABORTED', 'aborted while connecting'));
          else void session.close();
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        connectTimer = setTimeout(() => fail(providerError('PROVIDER_TIMEOUT', `no setupComplete within ${timeoutMs} ms`)), timeoutMs);

        const report = (err: ProviderError) => {
          if (!connected) fail(err);
          else if (!closing) events.onError(err);
        };
        const send = (message: Record<string, unknown>): void => {
          if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(message));
        };
        const contextUpdate = (update: { instructions?: string; tools?: LlmFunction[] }) => {
          const body: Record<string, unknown> = {};
          if (update.instructions !== undefined) body.systemInstruction = textContent(update.instructions);
          if (update.tools !== undefined) body.tools = { tools: liveTools(update.tools) };
          if (Object.keys(body).length > 0) send({ contextUpdate: body });
        };

        const drain = () => {
          clearTimeout(drainTimer);
          if (queued.length === 0) return;
          if (turn || awaiting || serverOpen) {
            // a reply that never came, or a turn never completed, must not hold our turns for ever
            const quietMs = performance.now() - lastServerAt;
            if (quietMs < giveUpMs) {
              drainTimer = setTimeout(drain, giveUpMs - quietMs);
              return;
            }
            log?.warn({ provider: GOOGLE_LIVE_PROVIDER_ID, awaiting, serverOpen }, 'Gemini Live went quiet mid-turn; sending the next turn');
            if (turn) endTurn(turn);
            awaiting = serverOpen = false;
          }
          const next = queued.shift()!;
          awaiting = true;
          if (next.tools !== undefined) contextUpdate({ tools: next.tools });
          restoreAfterTurn = next.tools !== undefined;
          send({
            clientContent:
              next.text === undefined
                ? { turnComplete: true }
                : { turns: [{ role: 'user', ...textContent(next.text) }], turnComplete: true },
          });
        };
        /** A note in the model's context; sent while it speaks, it interrupts it (not the caller). */
        const note = (text: string) => {
          if (serverOpen) ourInterrupt = true;
          send({ clientContent: { turns: [{ role: 'user', ...textContent(text) }], turnComplete: false } });
        };

        /** A connection: the first, or one that resumes the session (`handle`). */
        function dial(handle: string | null): WebSocket {
          const sock = new WebSocket(liveUrl(baseUrl, apiKey!));
          sock.on('unexpected-response', (req: ClientRequest, res: IncomingMessage) => {
            const status = res.statusCode ?? 0;
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              if (body.length < 2_000) body += chunk;
            });
            const done = () => {
              const detail = vendorMessage(body);
              const text = `Gemini Live refused the connection: HTTP ${status}${detail ? ` ${detail}` : ''}`;
              const err = status === 401 || status === 403 ? providerError('PROVIDER_AUTH', text, status) : providerError('PROVIDER_HTTP_ERROR', text, status);
              req.destroy();
              if (sock === ws) fail(err);
              else if (sock === successor) resumeFailed(err);
            };
            res.on('end', done);
            res.on('error', done);
          });
          sock.on('open', () => sock.send(JSON.stringify(setupMessage(model, { ...options, instructions, tools: sessionTools }, handle))));
          sock.on('message', (data: WebSocket.RawData) => received(sock, data));
          sock.on('error', (err) => {
            if (sock === ws && !settled && !connected) fail(providerError('PROVIDER_DISCONNECTED', `Gemini Live connection failed: ${err.message}`, undefined, err));
          });
          sock.on('close', (code: number, reason: Buffer) => {
            const err = closeError(code, reason.toString());
            if (sock === successor) resumeFailed(err);
            else if (sock !== ws) return; // a connection the session has left
            else if (connected && !closing && successor) lostWhileResuming = err; // the new one may still take over
            else finish(err);
          });
          return sock;
        }

        /** Gemini Live sends its JSON messages as binary frames as often as text ones. */
        const parse = (data: WebSocket.RawData): ServerMessage | ProviderError => {
          try {
            const parsed: unknown = JSON.parse(data.toString());
            if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
            if (!KNOWN_FIELDS.some((f) => f in parsed)) throw new Error('no known field');
            return parsed as ServerMessage;
          } catch (err) {
            return providerError('PROVIDER_PROTOCOL', 'Gemini Live sent an unreadable message', undefined, err);
          }
        };

        const received = (sock: WebSocket, data: WebSocket.RawData) => {
          if (closing) return;
          const m = parse(data);
          if (sock === successor) {
            if (m instanceof ProviderError) resumeFailed(m);
            else if (m.setupComplete !== undefined) resumed();
            return;
          }
          if (sock !== ws || settled !== connected) return;
          lastServerAt = performance.now();
          if (m instanceof ProviderError) report(m);
          else handle(m);
        };

        /** The end of the session: its connection closed (`err`: why, when we did not close it). */
        const finish = (err: ProviderError) => {
          closed = true;
          for (const t of [closeTimer, quietTimer, drainTimer, resumeTimer]) clearTimeout(t);
          signal?.removeEventListener('abort', onAbort);
          if (!connected) fail(err);
          else {
            if (!closing) events.onError(err);
            events.onClose?.();
          }
          const waiters = closeWaiters;
          closeWaiters = [];
          for (const w of waiters) w();
        };

        /** `goAway`: the same session on a new connection, before this one is closed. */
        const resume = (timeLeft: string | undefined) => {
          if (!resumeHandle || successor) {
            log?.warn({ provider: GOOGLE_LIVE_PROVIDER_ID, timeLeft }, 'Gemini Live will close the session, which cannot be resumed');
            return;
          }
          log?.debug({ provider: GOOGLE_LIVE_PROVIDER_ID, timeLeft }, 'resuming the Gemini Live session on a new connection');
          successor = dial(resumeHandle);
          resumeTimer = setTimeout(() => resumeFailed(providerError('PROVIDER_TIMEOUT', `no setupComplete on resuming within ${timeoutMs} ms`)), timeoutMs);
        };

        const resumed = () => {
          clearTimeout(resumeTimer);
          const old = ws;
          ws = successor!;
          successor = null;
          lostWhileResuming = null;
          old.removeAllListeners('message');
          old.close(1000, 'session resumed');
          // a turn the move cut is over; what we asked for is asked again if it never started
          if (turn) endTurn(turn);
          serverOpen = false;
          awaiting = false;
          drain();
        };

        const resumeFailed = (err: ProviderError) => {
          clearTimeout(resumeTimer);
          const sock = successor;
          successor = null;
          sock?.removeAllListeners('message');
          sock?.terminate();
          log?.warn({ provider: GOOGLE_LIVE_PROVIDER_ID, code: err.code }, 'Gemini Live session could not be resumed');
          if (lostWhileResuming) finish(lostWhileResuming);
        };

        const handle = (m: ServerMessage): void => {
          if (m.setupComplete !== undefined && !connected) {
            connected = true;
            settled = true;
            clearTimeout(connectTimer);
            resolve(session);
          }
          if (!connected) return; // nothing else is ours before setup
          if (m.error) {
            const status = m.error.code ?? 500;
            report(providerError(status === 401 || status === 403 ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR', `Gemini Live error ${m.error.status ?? status}: ${m.error.message ?? 'no message'}`, status));
            return;
          }
          const activity = m.voiceActivity?.voiceActivityType;
          if (activity) heardActivity = true;
          if (activity === 'ACTIVITY_START') callerStarted();
          else if (activity === 'ACTIVITY_END') callerStopped();
          if (m.serverContent) content(m.serverContent);
          if (m.toolCall) toolCall(m.toolCall.functionCalls ?? []);
          if (m.toolCallCancellation) {
            for (const id of m.toolCallCancellation.ids ?? []) cancelledCalls.add(id);
          }
          if (m.usageMetadata) log?.debug({ provider: GOOGLE_LIVE_PROVIDER_ID, usage: m.usageMetadata }, 'realtime usage');
          const update = m.sessionResumptionUpdate;
          if (update?.newHandle && update.resumable !== false) resumeHandle = update.newHandle;
          if (m.goAway) resume(m.goAway.timeLeft);
        };

        // Caller speech: `voiceActivity` when the server sends it; else `interrupted` starts it and
        // the model's next turn, a finished transcription or a quiet spell ends it.
        const callerStarted = () => {
          if (!heardActivity) armQuiet();
          if (callerSpeaking) return;
          callerSpeaking = true;
          events.onSpeechStarted();
        };
        const callerStopped = () => {
          clearTimeout(quietTimer);
          if (!callerSpeaking) return;
          callerSpeaking = false;
          events.onSpeechStopped?.();
        };
        const armQuiet = () => {
          clearTimeout(quietTimer);
          quietTimer = setTimeout(() => {
            callerStopped();
            callerFinal();
          }, CALLER_QUIET_MS);
        };
        const callerFinal = () => {
          const text = callerText.trim();
          callerText = '';
          if (text) events.onTranscript?.('user', text, true);
        };

        /** The model's reply as the owner sees it starts (a turn of the server's, or its part after a function call). */
        const beginTurn = (): Turn => {
          if (turn) return turn;
          callerStopped(); // the model answers: its VAD ended the caller's turn
          serverOpen = true;
          turn = { id: `live_turn_${++turnSeq}`, cancelled: cancelNext && awaiting, resampler: null, rate: 0, odd: null, transcript: '', mulawBytes: 0, restoreTools: restoreAfterTurn };
          if (awaiting) cancelNext = false;
          awaiting = false;
          restoreAfterTurn = false;
          return turn;
        };

        const endTurn = (t: Turn) => {
          if (!t.cancelled && t.resampler) emitAudio(t, t.resampler.flush());
          if (t.transcript && !t.cancelled) events.onTranscript?.('assistant', t.transcript, true);
          pastTurns.set(t.id, { transcript: t.transcript, ms: t.mulawBytes / 8 });
          if (pastTurns.size > TURNS_REMEMBERED) pastTurns.delete(pastTurns.keys().next().value!);
          turn = null;
          if (t.restoreTools) contextUpdate({ tools: sessionTools });
          events.onResponseDone?.();
        };

        const emitAudio = (t: Turn, pcm: Int16Array) => {
          if (pcm.length === 0) return;
          const mulaw = mulawEncode(pcm);
          t.mulawBytes += mulaw.length;
          events.onAudio(mulaw, t.id);
        };

        const modelAudio = (t: Turn, part: { mimeType?: string; data?: string }) => {
          const mime = part.mimeType ?? '';
          if (!mime.startsWith('audio/pcm') || !part.data || t.cancelled) return;
          const rate = Number(/rate=(\d+)/.exec(mime)?.[1] ?? LIVE_OUTPUT_RATE);
          let bytes = Buffer.from(part.data, 'base64');
          if (bytes.length === 0 || !Number.isInteger(rate) || rate <= 0) return;
          if (!t.resampler || t.rate !== rate) {
            if (t.resampler) emitAudio(t, t.resampler.flush());
            t.resampler = new Resampler(rate, PHONE_RATE);
            t.rate = rate;
          }
          if (t.odd) bytes = Buffer.concat([t.odd, bytes]);
          const even = bytes.length - (bytes.length % 2);
          t.odd = even < bytes.length ? Buffer.from(bytes.subarray(even)) : null;
          const pcm = new Int16Array(even / 2);
          for (let i = 0; i < pcm.length; i++) pcm[i] = bytes.readInt16LE(i * 2);
          emitAudio(t, t.resampler.process(pcm));
        };

        const content = (c: ServerContent) => {
          if (c.inputTranscription?.text) {
            callerText += c.inputTranscription.text;
            if (callerSpeaking && !heardActivity) armQuiet();
            events.onTranscript?.('user', callerText.trim(), false);
          }
          if (c.inputTranscription?.finished) {
            callerStopped();
            callerFinal();
          }
          if (c.interrupted) {
            if (ourInterrupt) ourInterrupt = false;
            else callerStarted(); // the caller spoke over the model (its VAD): barge-in
            if (turn) {
              turn.cancelled = true;
              endTurn(turn);
            }
          }
          const parts = c.modelTurn?.parts ?? [];
          if (!c.interrupted && (parts.some((p) => p.inlineData) || c.outputTranscription?.text)) {
            const t = beginTurn();
            for (const p of parts) if (p.inlineData) modelAudio(t, p.inlineData);
            if (c.outputTranscription?.text && !t.cancelled) {
              t.transcript += c.outputTranscription.text;
              events.onTranscript?.('assistant', t.transcript, false);
            }
          }
          if (c.turnComplete) {
            if (turn) endTurn(turn);
            else if (!serverOpen && awaiting) endTurn(beginTurn()); // the reply we asked for said nothing
            serverOpen = false;
            awaiting = false;
            ourInterrupt = false;
            callerFinal();
            drain();
          }
        };

        /** A function call ends the reply as the owner sees it (as a response with calls ends); the server's turn goes on. */
        const toolCall = (calls: Array<{ id?: string; name?: string; args?: Record<string, unknown> }>) => {
          if (calls.length === 0) return;
          const t = beginTurn();
          for (const call of calls) {
            const callId = call.id || `${t.id}_call_${callNames.size + 1}`;
            if (!call.name) {
              report(providerError('PROVIDER_PROTOCOL', `function call ${callId} has no name`));
              continue;
            }
            callNames.set(callId, call.name);
            if (!t.cancelled) events.onFunctionCall({ callId, name: call.name, arguments: JSON.stringify(call.args ?? {}) });
          }
          if (turn === t) endTurn(t);
        };

        const session: RealtimeSession = {
          sendAudio(mulaw: Buffer) {
            if (mulaw.length === 0) return;
            const pcm = upsampler.process(mulawDecode(mulaw));
            if (pcm.length === 0) return;
            const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');
            send({ realtimeInput: { audio: { data, mimeType: LIVE_INPUT_MIME } } });
          },
          update(changes: Partial<RealtimeSessionOptions>) {
            if (changes.tools !== undefined) sessionTools = changes.tools;
            if (changes.instructions !== undefined) instructions = changes.instructions;
            // a turn with its own functions keeps them; the session's come back after it
            const tools = turn?.restoreTools || restoreAfterTurn ? undefined : changes.tools;
            contextUpdate({ ...(changes.instructions !== undefined ? { instructions: changes.instructions } : {}), ...(tools !== undefined ? { tools } : {}) });
            if (changes.voice !== undefined || changes.turnDetection !== undefined) {
              log?.debug({ provider: GOOGLE_LIVE_PROVIDER_ID }, 'voice and turn detection are set at setup only');
            }
          },
          createResponse(instructions?: string, opts?: { tools?: LlmFunction[] }) {
            queued.push({ text: instructions, tools: opts?.tools });
            drain();
          },
          cancelResponse() {
            queued.length = 0;
            if (turn) turn.cancelled = true;
            else if (awaiting) cancelNext = true;
          },
          truncate(itemId: string, audioEndMs: number) {
            const past = itemId === turn?.id ? { transcript: turn.transcript, ms: turn.mulawBytes / 8 } : pastTurns.get(itemId);
            if (!past || audioEndMs >= past.ms) return;
            const heard = heardPart(past.transcript, audioEndMs, past.ms);
            note(heard
              ? `[The caller interrupted you and heard only this much of your last reply: "${heard}"]`
              : '[The caller interrupted you and did not hear your last reply.]');
          },
          sendFunctionResult(callId: string, output: string, respond = true) {
            if (cancelledCalls.delete(callId)) {
              log?.debug({ provider: GOOGLE_LIVE_PROVIDER_ID, callId }, 'result of a cancelled function call dropped');
              return;
            }
            send({
              toolResponse: {
                functionResponses: [{ id: callId, name: callNames.get(callId) ?? '', response: responseObject(output), scheduling: respond ? 'WHEN_IDLE' : 'SILENT' }],
              },
            });
            if (respond && !turn && !serverOpen) awaiting = true;
          },
          addMessage(role: 'system' | 'user', text: string) {
            note(role === 'system' ? `[System note: ${text}]` : text);
          },
          close() {
            signal?.removeEventListener('abort', onAbort);
            clearTimeout(quietTimer);
            clearTimeout(drainTimer);
            if (closed) return Promise.resolve();
            closing = true;
            if (successor) resumeFailed(providerError('PROVIDER_ABORTED', 'closed while resuming'));
            if (closed) return Promise.resolve(); // the old connection had already gone
            return new Promise<void>((done) => {
              closeWaiters.push(done);
              if (closeTimer) return;
              closeTimer = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
              ws.close(1000, 'call ended');
            });
          },
        };
        ws = dial(null);
      });
    },
  };
}
