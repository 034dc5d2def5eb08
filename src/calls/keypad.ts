/**
 * The keypad (DECISIONS 16, docs/keypad.md): `llm_config.builtin_tools: ["press_keys"]` offers
 * the model `press_keys(digits)`, and the call presses those keys at the far end, in order with
 * what the assistant says.
 *
 * Keys are audio on the call's playout like any utterance: DTMF tones (ITU-T Q.23 frequency
 * pairs, 100 ms of tone then 100 ms of silence a key, `w` half a second of silence), each frame
 * of a tone tagged with its key (`KeyFrame`). A transport that has its own way to send keys
 * (`CallTransport.sendKeyFrame`: SIP's RFC 4733 telephone-events) sends the tagged frames that
 * way, in their very slots; the others (Twilio, the browser) send the tones in the call's audio.
 */
import { PRESS_KEYS_TOOL } from '../../engine/schema.js';
import { linearToMulaw, MULAW_SILENCE } from '../audio/mulaw.js';
import type { LlmFunction } from '../providers/types.js';
import { FRAME_BYTES } from './outbound.js';
import type { Playout } from './playout.js';

export { PRESS_KEYS_TOOL };

/** The keys `press_keys` takes: digits, `*`, `#`, and `w` for a pause. */
export const KEYPAD_KEYS = '0123456789*#';
export const PAUSE_KEY = 'w';
/** At most this many characters in one call. */
export const MAX_KEYS = 64;
export const TONE_MS = 100;
export const GAP_MS = 100;
export const PAUSE_MS = 500;

/** The function offered to the model. */
export const PRESS_KEYS_FUNCTION: LlmFunction = {
  name: PRESS_KEYS_TOOL,
  description:
    'Press keys on the phone keypad (DTMF), as a caller would: to choose in an automated menu (IVR), or to enter a number or a code when asked to. ' +
    'The keys are sent to the other end of the call after what you said before calling this.',
  parameters: {
    type: 'object',
    properties: {
      digits: {
        type: 'string',
        description: 'The keys in order: 0-9, * and #; w waits half a second between keys. Example: "1", "4521#", "1w2".',
      },
    },
    required: ['digits'],
  },
};

/** One 20 ms frame of a key's tone, for a transport that sends keys its own way (RFC 4733). */
export interface KeyFrame {
  /** The key: `0`-`9`, `*`, `#`. */
  key: string;
  /** Its RFC 4733 event code (0-9; 10 `*`; 11 `#`). */
  event: number;
  /** The tone so far, in 8 kHz samples, up to the end of this frame (160, 320, … 800). */
  duration: number;
  /** The tone's last frame: the event ends here (`repeat` 1 and 2 say so again in the next two slots). */
  end: boolean;
  /** 0: a frame of the tone; 1, 2: its end sent again (RFC 4733 §2.5.1.4), in the silence after it. */
  repeat: number;
}

/** ITU-T Q.23: each key is one low and one high frequency (Hz). */
const LOW = { '1': 697, '2': 697, '3': 697, '4': 770, '5': 770, '6': 770, '7': 852, '8': 852, '9': 852, '*': 941, '0': 941, '#': 941 } as const;
const HIGH = { '1': 1209, '2': 1336, '3': 1477, '4': 1209, '5': 1336, '6': 1477, '7': 1209, '8': 1336, '9': 1477, '*': 1209, '0': 1336, '#': 1477 } as const;
type Key = keyof typeof LOW;

/** The key's pair of frequencies (Hz), low then high. */
export function dtmfFrequencies(key: string): [number, number] {
  if (!(key in LOW)) throw new RangeError(`not a keypad key: ${JSON.stringify(key)}`);
  return [LOW[key as Key], HIGH[key as Key]];
}

/**
 * Levels of each frequency (16-bit linear peak): about −8 dBm0 low and −6 dBm0 high (the high
 * group a little louder, as Q.23 senders do), together well under full scale.
 */
const LOW_PEAK = 9_000;
const HIGH_PEAK = 11_300;
const SAMPLES_PER_MS = 8;

/** The keys of `press_keys`' arguments, or why they cannot be pressed (told to the model). */
export function keysFrom(argumentsJson: string): { keys: string } | { error: string } {
  let args: unknown;
  try {
    args = JSON.parse(argumentsJson || '{}');
  } catch {
    return { error: 'arguments were not valid JSON' };
  }
  const digits = typeof args === 'object' && args !== null ? (args as { digits?: unknown }).digits : undefined;
  return checkKeys(digits);
}

/** `digits` as keys to press, or what is wrong with them. */
export function checkKeys(digits: unknown): { keys: string } | { error: string } {
  if (typeof digits !== 'string') return { error: 'digits: required, a string of keys such as "1" or "4521#"' };
  if (digits.length === 0) return { error: 'digits: no keys given' };
  if (digits.length > MAX_KEYS) return { error: `digits: at most ${MAX_KEYS} keys at a time` };
  const bad = [...digits].filter((c) => !KEYPAD_KEYS.includes(c) && c !== PAUSE_KEY);
  if (bad.length > 0) {
    const shown = [...new Set(bad)].map((c) => JSON.stringify(c)).join(', ');
    return { error: `digits: ${shown} cannot be pressed; only 0-9, *, # and w (a half-second pause) can; no key was sent` };
  }
  if (![...digits].some((c) => c !== PAUSE_KEY)) return { error: 'digits: only pauses (w), no key to press' };
  return { keys: digits };
}

/** The transcript's line for keys sent. */
export const keysSentLine = (keys: string) => `Keys sent: ${keys}`;

/** What the model is told once the keys were sent, or why they were not. */
export const keysSent = (keys: string) => JSON.stringify({ sent: keys });
export const keysNotSent = (why: string) => JSON.stringify({ error: why });

/** The keys' audio (μ-law 8 kHz, whole frames) and, frame by frame, the key each tone frame is. */
export interface KeypadAudio {
  audio: Buffer;
  frames: (KeyFrame | null)[];
}

/** The tones and silences of `keys` (already checked), on the 20 ms frame grid. */
export function keypadAudio(keys: string): KeypadAudio {
  const toneFrames = (TONE_MS * SAMPLES_PER_MS) / FRAME_BYTES;
  const gapFrames = (GAP_MS * SAMPLES_PER_MS) / FRAME_BYTES;
  const pauseFrames = (PAUSE_MS * SAMPLES_PER_MS) / FRAME_BYTES;
  let total = 0;
  for (const c of keys) total += c === PAUSE_KEY ? pauseFrames : toneFrames + gapFrames;
  const audio = Buffer.alloc(total * FRAME_BYTES, MULAW_SILENCE);
  const frames: (KeyFrame | null)[] = new Array<KeyFrame | null>(total).fill(null);
  let frame = 0;
  for (const c of keys) {
    if (c === PAUSE_KEY) {
      frame += pauseFrames;
      continue;
    }
    const [low, high] = dtmfFrequencies(c);
    const event = c === '*' ? 10 : c === '#' ? 11 : Number(c);
    const start = frame * FRAME_BYTES;
    const samples = toneFrames * FRAME_BYTES;
    for (let n = 0; n < samples; n++) {
      const t = n / 8000;
      const v = LOW_PEAK * Math.sin(2 * Math.PI * low * t) + HIGH_PEAK * Math.sin(2 * Math.PI * high * t);
      audio[start + n] = linearToMulaw(Math.round(v * edge(n, samples)));
    }
    for (let i = 0; i < toneFrames; i++) {
      frames[frame + i] = { key: c, event, duration: (i + 1) * FRAME_BYTES, end: i === toneFrames - 1, repeat: 0 };
    }
    const last = frames[frame + toneFrames - 1]!;
    for (let r = 1; r <= 2 && r <= gapFrames; r++) frames[frame + toneFrames - 1 + r] = { ...last, repeat: r };
    frame += toneFrames + gapFrames;
  }
  return { audio, frames };
}

/** A 2 ms rise and fall at the tone's ends, so that it starts and stops without a click. */
function edge(n: number, samples: number): number {
  const ramp = 2 * SAMPLES_PER_MS;
  const k = Math.min(n, samples - 1 - n);
  return k >= ramp ? 1 : 0.5 - 0.5 * Math.cos((Math.PI * k) / ramp);
}

/** How long pressing `keys` takes, in ms. */
export function keysDurationMs(keys: string): number {
  let ms = 0;
  for (const c of keys) ms += c === PAUSE_KEY ? PAUSE_MS : TONE_MS + GAP_MS;
  return ms;
}

/**
 * Presses `keys` at the far end: their audio goes through the playout after everything pushed
 * before it. Resolves true once it has all played, false when it was stopped first (`signal`, a
 * `clear`, the end of the call).
 */
export function playKeys(playout: Playout, keys: string, signal?: AbortSignal): Promise<boolean> {
  const { audio, frames } = keypadAudio(keys);
  return new Promise<boolean>((resolve) => {
    const stop = () => playout.stop(u);
    const u = playout.begin({
      // a clear drops what the far end had not played: keys are not sent again (a key twice is
      // another key), they stop where they were
      cleared: stop,
      finished: ({ interrupted }) => {
        signal?.removeEventListener('abort', stop);
        resolve(!interrupted);
      },
    });
    if (signal?.aborted) return stop();
    signal?.addEventListener('abort', stop, { once: true });
    playout.push(u, audio, frames);
    playout.mark(u);
    playout.end(u);
  });
}
