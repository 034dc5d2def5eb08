/**
 * The voice-activity fixtures (test/fixtures/vad/, made by scripts/make-vad-fixtures.sh): each
 * file's μ-law audio and what it must do to a call (its manifest entry).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseWav } from '../../src/audio/wav.js';
import { mulawEncode } from '../../src/audio/mulaw.js';

export const VAD_FIXTURES_DIR = join(fileURLToPath(new URL('.', import.meta.url)), '..', 'fixtures', 'vad');

export type VadOutcome = 'ignored' | 'cuts' | 'interrupts';

export interface VadFixture {
  file: string;
  what: string;
  /** Where the sound (or the speech, over a noise) is in the file, ms. */
  sound: [number, number];
  /** What the caller says (the STT's words), for speech. */
  words?: string;
  expect: VadOutcome;
  /** The file's audio, μ-law 8 kHz. */
  mulaw: Buffer;
}

interface Manifest {
  settings: Record<string, number>;
  fixtures: Array<Omit<VadFixture, 'mulaw'>>;
}

const manifest = JSON.parse(readFileSync(join(VAD_FIXTURES_DIR, 'manifest.json'), 'utf8')) as Manifest;

/** The turn-taking settings the outcomes hold for (the defaults). */
export const VAD_FIXTURE_SETTINGS = manifest.settings;

export const VAD_FIXTURES: VadFixture[] = manifest.fixtures.map((f) => {
  const wav = parseWav(readFileSync(join(VAD_FIXTURES_DIR, f.file)));
  if (wav.sampleRate !== 8000) throw new Error(`${f.file}: ${wav.sampleRate} Hz, not 8 kHz`);
  return { ...f, mulaw: mulawEncode(wav.pcm) };
});
