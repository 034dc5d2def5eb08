/**
 * A local stand-in for OpenAI's `POST /v1/audio/speech`, close enough that the official `openai`
 * SDK works against it (`new OpenAI({ baseURL: fake.url + '/v1' })`).
 *
 * It answers with a sine tone (default 1 kHz) whose length depends on the input (default 60 ms
 * per character, divided by `speed`), as `pcm` (24 kHz, 16-bit little-endian, mono, the way
 * OpenAI sends it) or `wav` (the same samples with a RIFF header), streamed in odd-sized chunks
 * so that a 16-bit sample is split between two network chunks. Errors use OpenAI's error body.
 * A script may change any of its fields for one request, chosen from the request (`perRequest`,
 * e.g. by voice), so that one fake serves a healthy call and a faulty one side by side.
 *
 * As an OpenAI-compatible server of one's own (Kokoro, Piper): `apiKey: null` asks for no key,
 * `models: null` and `voices: null` take any name, and `wavRate` is the rate of its WAV answers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connectionControls, layered, listenLocal, readBody, shutDown, trackConnections, type FakeConnections } from './http.js';

export interface FakeOpenAiTtsScript {
  /** The key asked for (`Authorization: Bearer`); `null`: none (a server of one's own). */
  apiKey: string | null;
  /** Accepted models and voices; `null`: any name. */
  models: string[] | null;
  voices: string[] | null;
  /** The rate of `wav` answers (OpenAI's is 24 kHz; a Piper server's 22.05 kHz). */
  wavRate: number;
  /** Tone frequency in Hz. */
  toneHz: number;
  amplitude: number;
  /** Output samples (24 kHz) per character of `input`, before `speed`. */
  samplesPerChar: number;
  /** Sizes of the body chunks written, cycled; odd sizes split samples. */
  chunkSizes: number[];
  /** Wait between body chunks (ms). */
  chunkDelayMs: number;
  /** Wait before the response headers (ms); `Infinity` never answers. */
  headersDelayMs: number;
  /** Answer every request with this status and OpenAI error body instead of audio. */
  error: { status: number; message: string; type?: string; code?: string | null } | null;
  /** Destroy the connection after this many body bytes (a drop mid-stream). */
  dropAfterBytes: number | null;
  /** The samples spoken for an input at `rate` (default a tone, `toneSamples`). */
  synthesize?: (input: string, rate: number) => Int16Array;
  /** Keep each request's headers and body (default true). */
  record?: boolean;
  /** `wav`: the header's sizes say 0xFFFFFFFF (unknown length), as a streaming server writes it. */
  streamedWav?: boolean;
  /** Answers raw 24 kHz PCM (`audio/pcm`) whatever format was asked, as a server that knows no WAV. */
  pcmAlways?: boolean;
  /** Answer 200 with a JSON body instead of audio. */
  jsonInsteadOfAudio: boolean;
  /** Answer this instead of audio (e.g. an HTML page with 200: a proxy in the way). */
  garbage?: { status?: number; contentType: string; body: string } | null;
  /**
   * Fields that differ for one request, chosen from the request (e.g. by voice); `undefined`
   * keeps the script as it is.
   */
  perRequest?: (request: { body: Record<string, unknown> | null; headers: IncomingMessage['headers'] }) =>
    | Partial<Omit<FakeOpenAiTtsScript, 'perRequest'>>
    | undefined;
}

export interface RecordedSpeechRequest {
  headers: IncomingMessage['headers'];
  body: Record<string, unknown> | null;
  /** Body bytes written so far. */
  bytesSent: number;
  /** The response (audio or error) was written to the end. */
  completed: boolean;
  /** The client went away before the response was complete. */
  aborted: boolean;
}

export interface FakeOpenAiTts extends FakeConnections {
  /** `http://127.0.0.1:<port>`: the value for `OPENAI_API_BASE`; the SDK's `baseURL` is this + `/v1`. */
  url: string;
  script: FakeOpenAiTtsScript;
  requests: RecordedSpeechRequest[];
  close(): Promise<void>;
}

export const FAKE_OPENAI_KEY = 'sk-test-openai';
export const FAKE_PCM_RATE = 24_000;

const VOICES = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer', 'verse', 'marin', 'cedar'];
const MODELS = ['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts'];

export const defaultOpenAiTtsScript = (): FakeOpenAiTtsScript => ({
  apiKey: FAKE_OPENAI_KEY,
  models: MODELS,
  voices: VOICES,
  wavRate: FAKE_PCM_RATE,
  toneHz: 1000,
  amplitude: 8000,
  samplesPerChar: 1440,
  chunkSizes: [1001, 333, 4097, 7, 2049],
  chunkDelayMs: 0,
  headersDelayMs: 0,
  error: null,
  dropAfterBytes: null,
  jsonInsteadOfAudio: false,
});

/** The 24 kHz samples the fake speaks for `input` (what the test compares against). */
export function toneSamples(script: FakeOpenAiTtsScript, input: string, speed = 1, rate = FAKE_PCM_RATE): Int16Array {
  const n = Math.round((input.length * script.samplesPerChar * (rate / FAKE_PCM_RATE)) / speed);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = Math.round(script.amplitude * Math.sin((2 * Math.PI * script.toneHz * i) / rate));
  }
  return out;
}

function pcmBytes(samples: Int16Array): Buffer {
  const buf = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) buf.writeInt16LE(samples[i]!, i * 2);
  return buf;
}

function wavHeader(dataBytes: number, rate: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

export async function startFakeOpenAiTts(overrides: Partial<FakeOpenAiTtsScript> = {}): Promise<FakeOpenAiTts> {
  const base: FakeOpenAiTtsScript = { ...defaultOpenAiTtsScript(), ...overrides };
  const requests: RecordedSpeechRequest[] = [];

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  const connections = trackConnections(server);

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    if (url.pathname !== '/v1/audio/speech' || req.method !== 'POST') {
      openAiError(res, 404, `Invalid URL (${req.method} ${url.pathname})`, 'invalid_request_error', null);
      return;
    }
    let body: Record<string, unknown> | null = null;
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      body = null;
    }
    // this request's script: the fields `perRequest` changes, the others read from `script` as used
    const script = layered(base, base.perRequest?.({ body, headers: req.headers }));
    const record: RecordedSpeechRequest = { headers: req.headers, body, bytesSent: 0, completed: false, aborted: false };
    if (script.record !== false) requests.push(record);
    res.on('finish', () => {
      record.completed = true;
    });
    res.on('close', () => {
      if (!record.completed) record.aborted = true;
    });

    if (script.headersDelayMs > 0) {
      if (!Number.isFinite(script.headersDelayMs)) return; // never answers; the client gives up
      await delayUnlessClosed(res, script.headersDelayMs);
      if (res.destroyed) return;
    }
    if (script.apiKey !== null && req.headers.authorization !== `Bearer ${script.apiKey}`) {
      const given = String(req.headers.authorization ?? '').replace(/^Bearer\s*/, '');
      openAiError(
        res,
        401,
        given ? `Incorrect API key provided: ${given.slice(0, 3)}***. You can find your API key at https://platform.openai.com/account/api-keys.` : "You didn't provide an API key.",
        'invalid_request_error',
        given ? 'invalid_api_key' : null,
      );
      return;
    }
    if (script.error) {
      openAiError(res, script.error.status, script.error.message, script.error.type ?? 'server_error', script.error.code ?? null);
      return;
    }
    if (!body) {
      openAiError(res, 400, 'We could not parse the JSON body of your request.', 'invalid_request_error', null);
      return;
    }
    const problem = validate(body, script);
    if (problem) {
      openAiError(res, 400, problem.message, 'invalid_request_error', null, problem.param);
      return;
    }
    if (script.garbage) {
      res.writeHead(script.garbage.status ?? 200, { 'content-type': script.garbage.contentType });
      res.end(script.garbage.body);
      return;
    }
    if (script.jsonInsteadOfAudio) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'unexpected' }));
      return;
    }
    const format = script.pcmAlways ? 'pcm' : ((body.response_format as string | undefined) ?? 'mp3');
    const rate = format === 'wav' ? script.wavRate : FAKE_PCM_RATE;
    const samples = script.synthesize
      ? script.synthesize(body.input as string, rate)
      : toneSamples(script, body.input as string, (body.speed as number | undefined) ?? 1, rate);
    const pcm = pcmBytes(samples);
    // a streamed WAV's sizes are not known ahead: 0xFFFFFFFF, as streaming servers write them
    const payload = format === 'wav' ? Buffer.concat([wavHeader(script.streamedWav ? 0xffffffff - 36 : pcm.length, rate), pcm]) : pcm;
    res.writeHead(200, {
      'content-type': format === 'wav' ? 'audio/wav' : 'audio/pcm',
      'transfer-encoding': 'chunked',
    });
    let off = 0;
    for (let k = 0; off < payload.length; k++) {
      if (res.destroyed) return;
      if (script.chunkDelayMs > 0) {
        await delayUnlessClosed(res, script.chunkDelayMs);
        if (res.destroyed) return;
      }
      const size = script.chunkSizes[k % script.chunkSizes.length] ?? 1024;
      let piece = payload.subarray(off, off + size);
      if (script.dropAfterBytes !== null && record.bytesSent + piece.length >= script.dropAfterBytes) {
        piece = piece.subarray(0, Math.max(0, script.dropAfterBytes - record.bytesSent));
        await write(res, piece);
        record.bytesSent += piece.length;
        res.socket?.destroy();
        return;
      }
      await write(res, piece);
      record.bytesSent += piece.length;
      off += piece.length;
    }
    res.end();
  }

  const { url } = await listenLocal(server);
  return {
    url,
    script: base,
    requests,
    ...connectionControls(server, connections),
    close: () => shutDown(server, { connections }),
  };
}

/** The checks OpenAI makes that matter here, with its messages' shape. */
function validate(body: Record<string, unknown>, script: FakeOpenAiTtsScript): { message: string; param: string } | null {
  if (typeof body.model !== 'string' || body.model === '' || (script.models !== null && !script.models.includes(body.model))) {
    return { message: `Invalid model: ${String(body.model)}`, param: 'model' };
  }
  if (typeof body.input !== 'string' || body.input.length === 0) {
    return { message: "Missing required parameter: 'input'.", param: 'input' };
  }
  if (body.input.length > 4096) {
    return { message: `String too long. Expected a string with maximum length 4096, but got a string with length ${body.input.length} instead.`, param: 'input' };
  }
  if (typeof body.voice !== 'string' || body.voice === '' || (script.voices !== null && !script.voices.includes(body.voice))) {
    return { message: `Invalid value for 'voice': ${String(body.voice)}`, param: 'voice' };
  }
  const format = body.response_format ?? 'mp3';
  if (format !== 'pcm' && format !== 'wav') {
    return { message: `The fake speaks only pcm and wav, not ${String(format)}`, param: 'response_format' };
  }
  if (body.speed !== undefined && (typeof body.speed !== 'number' || body.speed < 0.25 || body.speed > 4)) {
    return { message: 'Invalid speed: must be between 0.25 and 4.0', param: 'speed' };
  }
  if (body.stream_format !== undefined && body.stream_format !== 'audio') {
    return { message: 'The fake streams raw audio only (stream_format "audio")', param: 'stream_format' };
  }
  return null;
}

function openAiError(
  res: ServerResponse,
  status: number,
  message: string,
  type: string,
  code: string | null,
  param: string | null = null,
) {
  const text = JSON.stringify({ error: { message, type, param, code } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Waits `ms`, or less if the client goes away (so no timer of the fake outlives its request). */
function delayUnlessClosed(res: ServerResponse, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      res.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    res.on('close', done);
  });
}

function write(res: ServerResponse, chunk: Buffer): Promise<void> {
  return new Promise((resolve) => {
    if (chunk.length === 0 || res.destroyed) return resolve();
    if (res.write(chunk)) resolve();
    else {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    }
  });
}
