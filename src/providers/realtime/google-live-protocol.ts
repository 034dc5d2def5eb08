/**
 * The Gemini Live wire protocol as `google-live.ts` speaks it: where to dial, the `setup` message,
 * function declarations, the server's messages, and what a close frame or a refused upgrade means.
 */
import { toDeclaration } from '../llm/google.js';
import { ProviderError, type LlmFunction, type ProviderErrorCode, type RealtimeSessionOptions } from '../types.js';

export const GOOGLE_LIVE_PROVIDER_ID = 'google-live';
export const GOOGLE_LIVE_DEFAULT_MODEL = 'gemini-live-2.5-flash-preview';
export const GOOGLE_LIVE_DEFAULT_VOICE = 'Puck';
export const GOOGLE_LIVE_VOICES = ['Puck', 'Charon', 'Kore', 'Fenrir', 'Aoede', 'Leda', 'Orus', 'Zephyr'];

/** What Gemini Live hears and says. */
export const LIVE_INPUT_RATE = 16_000;
export const LIVE_OUTPUT_RATE = 24_000;
export const PHONE_RATE = 8_000;
export const LIVE_INPUT_MIME = `audio/pcm;rate=${LIVE_INPUT_RATE}`;

/**
 * `https://generativelanguage.googleapis.com` (or `.../v1alpha`) →
 * `wss://…/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=…`.
 */
export function liveUrl(baseUrl: string, apiKey: string): string {
  const url = new URL(baseUrl);
  if (url.protocol === 'http:') url.protocol = 'ws:';
  else if (url.protocol === 'https:') url.protocol = 'wss:';
  let path = url.pathname.replace(/\/+$/, '');
  let version = 'v1beta';
  const versioned = /\/(v1(?:beta|alpha)?)$/.exec(path);
  if (versioned) {
    version = versioned[1]!;
    path = path.slice(0, -versioned[0].length);
  }
  url.pathname = `${path}/ws/google.ai.generativelanguage.${version}.GenerativeService.BidiGenerateContent`;
  url.search = '';
  url.searchParams.set('key', apiKey);
  return url.toString();
}

/** A function as Live declares it: as the `google` chat model does, and non-blocking. */
export function liveDeclaration(fn: LlmFunction): Record<string, unknown> {
  return { ...toDeclaration(fn), behavior: 'NON_BLOCKING' };
}

export const liveTools = (fns: LlmFunction[]) => (fns.length > 0 ? [{ functionDeclarations: fns.map(liveDeclaration) }] : []);
export const textContent = (text: string) => ({ parts: [{ text }] });

/**
 * The `setup` message: audio out in the voice, instructions, functions, server VAD, transcripts
 * both ways, resumable (`resume`: the handle of the session this connection takes over).
 */
export function setupMessage(model: string, options: RealtimeSessionOptions, resume: string | null = null): Record<string, unknown> {
  const td = options.turnDetection;
  const vad: Record<string, unknown> = { disabled: false };
  if (td?.prefixPaddingMs !== undefined) vad.prefixPaddingMs = Math.round(td.prefixPaddingMs);
  if (td?.silenceDurationMs !== undefined) vad.silenceDurationMs = Math.round(td.silenceDurationMs);
  // OpenAI-style threshold (higher: harder to trigger) → Gemini's two sensitivity steps
  if (td?.threshold !== undefined && td.threshold >= 0.7) vad.startOfSpeechSensitivity = 'START_SENSITIVITY_LOW';
  if (td?.threshold !== undefined && td.threshold <= 0.3) vad.startOfSpeechSensitivity = 'START_SENSITIVITY_HIGH';
  const setup: Record<string, unknown> = {
    model: model.startsWith('models/') ? model : `models/${model}`,
    generationConfig: {
      responseModalities: ['AUDIO'],
      speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: options.voice ?? GOOGLE_LIVE_DEFAULT_VOICE } } },
    },
    systemInstruction: textContent(options.instructions),
    realtimeInputConfig: { automaticActivityDetection: vad, activityHandling: 'START_OF_ACTIVITY_INTERRUPTS' },
    inputAudioTranscription: {},
    outputAudioTranscription: {},
    // a phone call may outlast the context of an audio session: the oldest turns slide out
    contextWindowCompression: { slidingWindow: {} },
    // a connection lives about ten minutes: the session goes on over a new one (`goAway`)
    sessionResumption: resume ? { handle: resume } : {},
  };
  const tools = liveTools(options.tools);
  if (tools.length > 0) setup.tools = tools;
  return { setup };
}

/** The words of `transcript` in the first `heardMs` of `totalMs` of audio (words spread evenly). */
export function heardPart(transcript: string, heardMs: number, totalMs: number): string {
  const words = transcript.trim().split(/\s+/).filter(Boolean);
  if (totalMs <= 0 || words.length === 0) return '';
  return words.slice(0, Math.floor((words.length * Math.min(heardMs, totalMs)) / totalMs)).join(' ');
}

export function providerError(code: ProviderErrorCode, message: string, status?: number, cause?: unknown) {
  return new ProviderError(code, GOOGLE_LIVE_PROVIDER_ID, message, status, { cause });
}

/**
 * Gemini Live ends a session it refuses with a close frame: 1008 (policy: a bad key, a model it
 * does not serve), 1007 (invalid argument), 1011 (internal), 1013 (try later); others are a drop.
 */
export function closeError(code: number, reason: string): ProviderError {
  const text = `Gemini Live closed the connection (${code}${reason ? ` ${reason}` : ''})`;
  if (code === 1008 && /api key|permission|unauthori[sz]ed|forbidden|credential/i.test(reason)) {
    return providerError('PROVIDER_AUTH', text, 403);
  }
  if (code === 1007 || code === 1008) return providerError('PROVIDER_HTTP_ERROR', text, 400);
  if (code === 1011) return providerError('PROVIDER_HTTP_ERROR', text, /quota|exhausted|rate/i.test(reason) ? 429 : 500);
  if (code === 1013) return providerError('PROVIDER_HTTP_ERROR', text, 503);
  return providerError('PROVIDER_DISCONNECTED', text);
}
export interface Part {
  text?: string;
  thought?: boolean;
  inlineData?: { mimeType?: string; data?: string };
}

export interface ServerContent {
  modelTurn?: { parts?: Part[] };
  turnComplete?: boolean;
  generationComplete?: boolean;
  interrupted?: boolean;
  inputTranscription?: { text?: string; finished?: boolean };
  outputTranscription?: { text?: string; finished?: boolean };
}

export interface ServerMessage {
  setupComplete?: unknown;
  serverContent?: ServerContent;
  toolCall?: { functionCalls?: Array<{ id?: string; name?: string; args?: Record<string, unknown> }> };
  toolCallCancellation?: { ids?: string[] };
  goAway?: { timeLeft?: string };
  sessionResumptionUpdate?: { newHandle?: string; resumable?: boolean };
  usageMetadata?: Record<string, unknown>;
  voiceActivity?: { voiceActivityType?: string };
  error?: { code?: number; message?: string; status?: string };
}

export const KNOWN_FIELDS = [
  'setupComplete', 'serverContent', 'toolCall', 'toolCallCancellation', 'goAway', 'usageMetadata',
  'sessionResumptionUpdate', 'voiceActivity', 'voiceActivityDetectionSignal', 'error',
];

/** Google's `error.message` of an error body, or a short excerpt of the raw text. */
export function vendorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } };
    if (parsed.error?.message) return parsed.error.message;
  } catch {
    // not JSON
  }
  return body.trim().slice(0, 200);
}
