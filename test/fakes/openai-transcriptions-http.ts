/**
 * A local stand-in for OpenAI's `POST /v1/audio/transcriptions` as OpenAI-compatible servers
 * speak it (speaches, whisper.cpp's server, LocalAI), close enough that the official `openai` SDK
 * (`audio.transcriptions.create`) works against it (`baseURL: fake.url + '/v1'`).
 *
 * It parses the multipart request for real (the platform's own `Response.formData()`): `file`
 * (a WAV, parsed), `model` (required, any name), `language`, `prompt`, `response_format` (`json`,
 * the default, `text` or `verbose_json`), and answers with the text `transcribe` gives for the
 * clip. Errors use OpenAI's error body. A script may change any of its fields for one request
 * (`perRequest`, e.g. by model), so that one fake serves a healthy call and a faulty one side
 * by side. With `apiKey` set it wants `Authorization: Bearer <key>`; by default it wants none,
 * as a self-hosted server.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { parseWav } from '../../src/audio/wav.js';
import { connectionControls, fakeTimers, layered, listenLocal, shutDown, trackConnections, type FakeConnections } from './http.js';

/** What the fake was sent, one clip. */
export interface TranscriptionRequest {
  index: number;
  headers: IncomingMessage['headers'];
  /** Every form field but the file. */
  fields: Record<string, string>;
  filename: string | null;
  fileType: string | null;
  /** The WAV's rate, and its samples (mono assumed). */
  sampleRate: number;
  pcm: Int16Array;
  /** ms of audio in the clip. */
  durationMs: number;
  /** The answer was written to the end. */
  answered: boolean;
}

export type TranscriptionFault =
  /** Answer with this status and OpenAI's error body. */
  | { type: 'status'; status: number; message?: string }
  /** 200 with a body that is not the protocol. */
  | { type: 'garbage'; body?: string; contentType?: string }
  /** Destroy the connection once the request is read. */
  | { type: 'drop' }
  /** Read the request and never answer. */
  | { type: 'hang' };

export interface FakeTranscriptionsScript {
  /** The key `Authorization: Bearer` must carry; null (default): none is asked for. */
  apiKey: string | null;
  /** The clip's text (default: `clip <n>` for the n-th request, from 1). */
  transcribe: (request: TranscriptionRequest) => string;
  /** Wait before answering (ms). */
  delayMs: number;
  fault: TranscriptionFault | null;
  /** Fields that differ for one request; `undefined` keeps the script as it is. */
  perRequest?: (request: TranscriptionRequest) => Partial<Omit<FakeTranscriptionsScript, 'perRequest'>> | undefined;
}

export interface FakeTranscriptions extends FakeConnections {
  /** `http://127.0.0.1:<port>`: a block's `base_url`; the SDK's `baseURL` is this + `/v1`. */
  url: string;
  script: FakeTranscriptionsScript;
  requests: TranscriptionRequest[];
  close(): Promise<void>;
}

export const defaultTranscriptionsScript = (): FakeTranscriptionsScript => ({
  apiKey: null,
  transcribe: (r) => `clip ${r.index + 1}`,
  delayMs: 0,
  fault: null,
});

function sendError(res: ServerResponse, status: number, message: string, type = 'invalid_request_error'): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type, param: null, code: null } }));
}

function readRaw(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function startFakeTranscriptions(overrides: Partial<FakeTranscriptionsScript> = {}): Promise<FakeTranscriptions> {
  const base: FakeTranscriptionsScript = { ...defaultTranscriptionsScript(), ...overrides };
  const requests: TranscriptionRequest[] = [];
  const { pending: timers, later } = fakeTimers();

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((err: Error) => {
      if (!res.headersSent) sendError(res, 500, `fake: ${err.message}`, 'server_error');
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    if (req.method !== 'POST' || path !== '/v1/audio/transcriptions') {
      await readRaw(req);
      return sendError(res, 404, `Not found: ${req.method} ${path}`);
    }
    const raw = await readRaw(req);
    const contentType = req.headers['content-type'] ?? '';
    if (!contentType.startsWith('multipart/form-data')) return sendError(res, 400, 'the body must be multipart/form-data');
    let form: FormData;
    try {
      form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
    } catch (err) {
      return sendError(res, 400, `unreadable multipart body: ${(err as Error).message}`);
    }
    const fields: Record<string, string> = {};
    let file: File | null = null;
    for (const [name, value] of form.entries()) {
      if (typeof value === 'string') fields[name] = value;
      else if (name === 'file') file = value;
    }
    const record: TranscriptionRequest = {
      index: requests.length,
      headers: req.headers,
      fields,
      filename: file?.name ?? null,
      fileType: file?.type || null,
      sampleRate: 0,
      pcm: new Int16Array(0),
      durationMs: 0,
      answered: false,
    };
    requests.push(record);
    const script = layered(base, base.perRequest?.(record));
    if (script.apiKey !== null && req.headers.authorization !== `Bearer ${script.apiKey}`) {
      return sendError(res, 401, 'Incorrect API key provided.', 'invalid_request_error');
    }
    if (!file) return sendError(res, 400, "you must provide a 'file'");
    if (!fields.model) return sendError(res, 400, "you must provide a 'model'");
    try {
      const wav = parseWav(new Uint8Array(await file.arrayBuffer()));
      record.sampleRate = wav.sampleRate;
      record.pcm = wav.pcm;
      record.durationMs = (wav.pcm.length / wav.channels / wav.sampleRate) * 1000;
    } catch (err) {
      return sendError(res, 400, `the file is not a WAV this server reads: ${(err as Error).message}`);
    }

    if (script.delayMs > 0) await new Promise<void>((resolve) => later(script.delayMs, resolve));
    const fault = script.fault;
    if (fault?.type === 'hang') return;
    if (fault?.type === 'drop') {
      req.socket.destroy();
      return;
    }
    if (fault?.type === 'status') {
      sendError(res, fault.status, fault.message ?? `fake failure ${fault.status}`, fault.status === 429 ? 'rate_limit_error' : 'server_error');
      record.answered = true;
      return;
    }
    if (fault?.type === 'garbage') {
      res.writeHead(200, { 'content-type': fault.contentType ?? 'text/html' });
      res.end(fault.body ?? '<html><body>Bad gateway</body></html>');
      record.answered = true;
      return;
    }
    const text = script.transcribe(record);
    const format = fields.response_format ?? 'json';
    if (format === 'text') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(text);
    } else if (format === 'json' || format === 'verbose_json') {
      const seconds = record.durationMs / 1000;
      const body =
        format === 'json'
          ? { text }
          : { task: 'transcribe', language: fields.language ?? 'english', duration: seconds, text, segments: [{ id: 0, start: 0, end: seconds, text }] };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    } else {
      return sendError(res, 400, `response_format ${format} is not supported by this server`);
    }
    record.answered = true;
  }

  const connections = trackConnections(server);
  const { url } = await listenLocal(server);
  return {
    url,
    script: base,
    requests,
    ...connectionControls(server, connections),
    close: () => shutDown(server, { timers, connections }),
  };
}
