/**
 * The web-call stream's messages (docs/web-calls.md): binary frames are 16 kHz 16-bit mono PCM
 * both ways; text frames are JSON control messages. This file parses what the browser sends and
 * writes what it is sent; it never throws on input.
 */
import type { CallObservation } from '../../calls/transport.js';

export const WEB_SAMPLE_RATE = 16_000;
/** 20 ms of 16 kHz 16-bit mono. */
export const WEB_FRAME_BYTES = 640;
/** The largest audio frame the browser may send: 1 s. */
export const MAX_AUDIO_BYTES = 32_000;
/** The largest WebSocket message taken at all: more closes the socket (1009). */
export const MAX_MESSAGE_BYTES = 64 * 1024;
const MAX_MARK_NAME = 200;

export type BrowserMessage = { type: 'mark'; name: string } | { type: 'dtmf'; digit: string } | { type: 'hangup' };

export type Parsed<T> = { ok: true; message: T } | { ok: false; reason: string };

/** A binary frame from the browser: usable audio, or why not. */
export function checkAudio(data: Buffer): string | null {
  if (data.length === 0) return 'an empty audio frame';
  if (data.length % 2 !== 0) return `an audio frame of ${data.length} bytes: 16-bit samples need an even length`;
  if (data.length > MAX_AUDIO_BYTES) return `an audio frame of ${data.length} bytes: at most ${MAX_AUDIO_BYTES} (1 s)`;
  return null;
}

/** A text frame from the browser. */
export function parseBrowserMessage(text: string): Parsed<BrowserMessage> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, reason: 'not a JSON object' };
  const m = value as Record<string, unknown>;
  switch (m.type) {
    case 'mark':
      if (typeof m.name !== 'string' || m.name === '' || m.name.length > MAX_MARK_NAME) {
        return { ok: false, reason: 'mark: "name" must be the name of a mark the server sent' };
      }
      return { ok: true, message: { type: 'mark', name: m.name } };
    case 'dtmf':
      if (typeof m.digit !== 'string' || !/^[0-9*#A-D]$/.test(m.digit)) {
        return { ok: false, reason: 'dtmf: "digit" must be one of 0-9, *, #, A-D' };
      }
      return { ok: true, message: { type: 'dtmf', digit: m.digit } };
    case 'hangup':
      return { ok: true, message: { type: 'hangup' } };
    default:
      return { ok: false, reason: `unknown message type ${describeType(m.type)} (mark, dtmf, hangup)` };
  }
}

/**
 * The `type` the browser sent, for its error message: a string or number as JSON (cut short), an
 * array or object only by kind. Never `JSON.stringify` of what the browser nested: 64 KiB of
 * `[[[…]]]` parses, but writing it back out overflows the stack.
 */
function describeType(type: unknown): string {
  if (Array.isArray(type)) return 'an array';
  if (typeof type === 'object' && type !== null) return 'an object';
  return JSON.stringify(type ?? null).slice(0, 40);
}

const round = (ms: number | null) => (ms === null ? null : Math.round(ms * 10) / 10);

/** What the browser is told of the call (`CallObservation`), as a JSON text frame. */
export function observationMessage(event: CallObservation): string {
  switch (event.type) {
    case 'message':
      return JSON.stringify({ type: 'message', message: event.message });
    case 'node':
      return JSON.stringify({ type: 'node', node_id: event.node_id, nodes_visited: event.nodes_visited });
    case 'turn':
      return JSON.stringify({ type: 'turn', node_id: event.node_id });
    case 'latency': {
      const l = event.latency;
      return JSON.stringify({
        type: 'latency',
        latency: {
          node_id: l.nodeId,
          total_ms: round(l.totalMs),
          provider_wait_ms: round(l.providerWaitMs),
          service_ms: round(l.serviceMs),
          model_wait_ms: round(l.modelWaitMs),
          tts_wait_ms: round(l.ttsWaitMs),
          model_first_token_ms: round(l.modelFirstTokenMs),
        },
      });
    }
    case 'ended':
      return JSON.stringify({ type: 'ended', ended_reason: event.ended_reason });
  }
}
