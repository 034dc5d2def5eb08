/**
 * A local stand-in for the Gemini Live API (`BidiGenerateContent` over WebSocket), close enough
 * that the official `@google/genai` SDK (`ai.live.connect`) talks to it.
 *
 * Like Google, it takes the key as `?key=` (a wrong or missing one: the upgrade is accepted, then
 * closed 1008 "API key not valid"), wants `setup` first (a model it does not serve: 1008; a
 * malformed setup: 1007), answers `setupComplete`, and sends its JSON as binary frames. Caller
 * audio is `realtimeInput.audio` PCM16 (`audio/pcm;rate=16000`); its own VAD hears it (RMS over a
 * threshold), ends the caller's turn after the setup's `silenceDurationMs` of quiet, transcribes
 * it from the script (`inputTranscription`), and replies. Speech while the model streams
 * interrupts it (`interrupted`, then `turnComplete`), and so does a client turn. Replies are PCM16
 * at 24 kHz in `modelTurn` parts, the transcript as `outputTranscription`, function calls as
 * `toolCall` (non-blocking ones end the turn; blocking ones wait for their `toolResponse`),
 * `generationComplete`, `turnComplete` and `usageMetadata`. A setup that asks for resumption gets
 * a `sessionResumptionUpdate` handle after setup and after each turn, and may be scripted to get
 * `goAway` and a close after some turns; a setup with a handle it gave out resumes. Faults: a refused upgrade (any
 * HTTP status), silence before or after setup, a dropped socket, a frame that is not JSON, a
 * close frame of Google's after setup.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { fakeTimers, layered, listenLocal, shutDown } from './http.js';

export const FAKE_LIVE_KEY = 'AIza-live-test';
export const FAKE_LIVE_MODELS = ['gemini-live-2.5-flash-preview', 'gemini-2.5-flash-native-audio-preview-09-2025'];
const VOICES = ['Puck', 'Charon', 'Kore', 'Fenrir', 'Aoede', 'Leda', 'Orus', 'Zephyr'];
const PATH = /^\/+ws\/google\.ai\.generativelanguage\.(v1beta|v1alpha)\.GenerativeService\.BidiGenerateContent$/;
/** RMS of a 16 kHz PCM16 chunk above which the fake's VAD hears speech. */
const SPEECH_RMS = 300;

export interface FakeLiveReply {
  /** This much of a 24 kHz tone (PCM16), in chunks of `chunkMs`. */
  audioMs?: number;
  /** Or these samples, at `rate` (default 24000). */
  pcm?: Int16Array;
  rate?: number;
  /** Sent word by word as `outputTranscription`, spread over the chunks. */
  transcript?: string;
  /** After the audio: a `toolCall`. */
  functionCalls?: Array<{ name: string; args?: Record<string, unknown>; id?: string }>;
  chunkMs?: number;
  /** Pause between chunks, ms (default 5): room for barge-in. */
  intervalMs?: number;
}

export interface ReplyContext {
  connection: FakeLiveConnection;
  /** What the model answers: the caller's spoken turn, a client turn, or function results. */
  trigger: 'speech' | 'client' | 'tool';
  /** `speech`: the scripted transcript; `client`: the turn's text. */
  text: string;
  functionResponses?: Array<Record<string, unknown>>;
}

export interface FakeLiveScript {
  apiKey?: string;
  models?: string[];
  /** Refuse the upgrade with this HTTP status and Google's error body. */
  refuseUpgrade?: { status: number; message?: string };
  /** Accept the upgrade and never answer `setup`. */
  silent?: boolean;
  /** Answer `setup`, then nothing more. */
  silentAfterSetup?: boolean;
  /** Close with this frame right after `setupComplete` (a quota exhausted: 1011). */
  closeAfterSetup?: { code: number; reason: string };
  /** Drop the TCP connection after this many audio chunks of the connection. */
  dropAfterChunks?: number;
  /** Send an HTML page as a text frame after this many audio chunks. */
  garbageAfterChunks?: number;
  /** After this many completed turns on a connection: `goAway`, then the close (1000) `goAwayCloseMs` later (default 100). */
  goAwayAfterTurns?: number;
  goAwayCloseMs?: number;
  /** Send `voiceActivity` start and end around the caller's speech. */
  voiceActivity?: boolean;
  /** What the caller says in each spoken turn, in order. */
  userTranscripts?: string[];
  /** The model's replies in order, to whatever asks; then `reply`, then silence (an empty turn). */
  replies?: FakeLiveReply[];
  reply?: (ctx: ReplyContext) => FakeLiveReply | null | undefined;
  /** Fields for one connection, by its model. */
  perConnection?: (upgrade: { model: string | null; url: URL }) => Partial<Omit<FakeLiveScript, 'perConnection'>> | undefined;
}

export type ClientMessage = Record<string, unknown>;

export interface FakeLiveConnection {
  readonly id: number;
  readonly url: URL;
  /** `setup` as received. */
  setup: Record<string, unknown> | null;
  model: string | null;
  readonly messages: ClientMessage[];
  /** PCM16 at 16 kHz received, and every `mimeType` it came as. */
  readonly audio: Buffer[];
  readonly mimeTypes: Set<string>;
  audioChunksSent: number;
  /** The instructions and function names in force (setup, then `contextUpdate`s). */
  instructions: string;
  functions: string[];
  /** The handle this connection resumed (`setup.sessionResumption.handle`), if any. */
  resumedFrom: string | null;
  /** Turns completed on this connection. */
  turnsCompleted: number;
  /** Model turns interrupted by speech or a client message. */
  interruptions: number;
  closed: boolean;
  closeCode: number | null;
  readonly whenClosed: Promise<void>;
  send(message: Record<string, unknown>): void;
  sendRaw(text: string): void;
  drop(): void;
  close(code: number, reason: string): void;
}

export interface FakeGoogleLive {
  /** `http://127.0.0.1:<port>`: `GOOGLE_API_BASE`, and the SDK's `httpOptions.baseUrl`. */
  url: string;
  apiKey: string;
  connections: FakeLiveConnection[];
  script: FakeLiveScript;
  close(): Promise<void>;
}

const textOf = (content: unknown): string =>
  ((content as { parts?: Array<{ text?: string }> } | undefined)?.parts ?? []).map((p) => p.text ?? '').join('');

const namesOf = (tools: unknown): string[] =>
  ((tools as Array<{ functionDeclarations?: Array<{ name?: string }> }> | undefined) ?? []).flatMap((t) => (t.functionDeclarations ?? []).map((d) => String(d.name)));

function tone(ms: number, rate: number): Int16Array {
  const out = new Int16Array(Math.round((ms * rate) / 1000));
  for (let i = 0; i < out.length; i++) out[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate));
  return out;
}

function rms(pcm: Buffer): number {
  let sum = 0;
  const n = Math.floor(pcm.length / 2);
  for (let i = 0; i < n; i++) sum += pcm.readInt16LE(i * 2) ** 2;
  return n ? Math.sqrt(sum / n) : 0;
}

export async function startFakeGoogleLive(script: FakeLiveScript = {}): Promise<FakeGoogleLive> {
  const apiKey = script.apiKey ?? FAKE_LIVE_KEY;
  const timers = fakeTimers();
  const sockets = new Set<WebSocket>();
  const connections: FakeLiveConnection[] = [];
  const server = createServer((_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { code: 404, message: 'Not Found', status: 'NOT_FOUND' } }));
  });
  const wss = new WebSocketServer({ noServer: true });
  const replies = [...(script.replies ?? [])];
  /** Resumption handles given out. */
  const handles = new Set<string>();
  let handleSeq = 0;

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(`http://127.0.0.1${req.url ?? '/'}`); // the SDK's path starts `//ws/`
    const refuse = (status: number, message: string, reason: string) => {
      const body = JSON.stringify({ error: { code: status, message, status: reason } });
      socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    };
    if (!PATH.test(url.pathname)) return refuse(404, 'Not Found', 'NOT_FOUND');
    const s = layered(script, script.perConnection?.({ model: null, url }));
    if (s.refuseUpgrade) {
      const status = s.refuseUpgrade.status;
      return refuse(status, s.refuseUpgrade.message ?? 'Resource has been exhausted (e.g. check quota).', status === 429 ? 'RESOURCE_EXHAUSTED' : 'UNAVAILABLE');
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      serve(ws, url, s);
    });
  });

  function serve(ws: WebSocket, url: URL, initial: FakeLiveScript): void {
    let s = initial;
    let resolveClosed!: () => void;
    let silenceTimer: NodeJS.Timeout | null = null;
    let callerSpeaking = false;
    let streaming: { stop: boolean } | null = null; // the model's turn under way
    let waitingTools = false; // a blocking function call awaits its response
    const outstanding = new Map<string, string>(); // call id → name
    let idleReplies: ReplyContext[] = []; // WHEN_IDLE results: answered once the turn ends
    let callSeq = 0;
    const conn: FakeLiveConnection = {
      id: connections.length + 1,
      url,
      setup: null,
      model: null,
      messages: [],
      audio: [],
      mimeTypes: new Set(),
      audioChunksSent: 0,
      instructions: '',
      functions: [],
      interruptions: 0,
      resumedFrom: null,
      turnsCompleted: 0,
      closed: false,
      closeCode: null,
      whenClosed: new Promise<void>((r) => (resolveClosed = r)),
      send: (m) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(Buffer.from(JSON.stringify(m)), { binary: true });
      },
      sendRaw: (text) => ws.readyState === WebSocket.OPEN && ws.send(text),
      drop: () => ws.terminate(),
      close: (code, reason) => ws.close(code, reason),
    };
    connections.push(conn);
    ws.on('close', (code) => {
      conn.closed = true;
      conn.closeCode = code;
      if (streaming) streaming.stop = true;
      if (silenceTimer) clearTimeout(silenceTimer);
      sockets.delete(ws);
      resolveClosed();
    });

    if (url.searchParams.get('key') !== apiKey) {
      conn.close(1008, 'API key not valid. Please pass a valid API key.');
      return;
    }

    const interrupt = () => {
      if (!streaming) return;
      streaming.stop = true;
      streaming = null;
      conn.interruptions++;
      conn.send({ serverContent: { interrupted: true } });
      conn.send({ serverContent: { turnComplete: true } });
    };

    const nextReply = (ctx: ReplyContext): FakeLiveReply => replies.shift() ?? s.reply?.(ctx) ?? {};

    const respond = async (ctx: ReplyContext): Promise<void> => {
      const reply = nextReply(ctx);
      const run = { stop: false };
      streaming = run;
      const rate = reply.rate ?? 24_000;
      const pcm = reply.pcm ?? tone(reply.audioMs ?? 0, rate);
      const chunkSamples = Math.round(((reply.chunkMs ?? 40) * rate) / 1000);
      const chunks = Math.ceil(pcm.length / chunkSamples);
      const words = (reply.transcript ?? '').split(/\s+/).filter(Boolean);
      let wordsSent = 0;
      for (let i = 0; i < chunks; i++) {
        await timers.sleep(reply.intervalMs ?? 5);
        if (run.stop) return;
        const piece = pcm.subarray(i * chunkSamples, (i + 1) * chunkSamples);
        const data = Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength).toString('base64');
        conn.send({ serverContent: { modelTurn: { parts: [{ inlineData: { mimeType: `audio/pcm;rate=${rate}`, data } }] } } });
        conn.audioChunksSent++;
        const upTo = Math.round((words.length * (i + 1)) / chunks);
        if (upTo > wordsSent) {
          conn.send({ serverContent: { outputTranscription: { text: `${wordsSent > 0 ? ' ' : ''}${words.slice(wordsSent, upTo).join(' ')}` } } });
          wordsSent = upTo;
        }
        if (s.dropAfterChunks !== undefined && conn.audioChunksSent >= s.dropAfterChunks) return conn.drop();
        if (s.garbageAfterChunks !== undefined && conn.audioChunksSent >= s.garbageAfterChunks) {
          conn.sendRaw('<html><body>502 Bad Gateway</body></html>');
        }
      }
      if (wordsSent < words.length) conn.send({ serverContent: { outputTranscription: { text: words.slice(wordsSent).join(' ') } } });
      if (reply.functionCalls?.length) {
        const declared = declarations();
        const calls = reply.functionCalls.map((c) => ({ id: c.id ?? `fc_${conn.id}_${++callSeq}`, name: c.name, args: c.args ?? {} }));
        for (const c of calls) outstanding.set(c.id, c.name);
        await timers.sleep(reply.intervalMs ?? 5);
        if (run.stop) return;
        conn.send({ toolCall: { functionCalls: calls } });
        if (calls.some((c) => declared.get(c.name) !== 'NON_BLOCKING')) {
          waitingTools = true; // the turn goes on once the results are in
          return;
        }
      }
      finish(run, pcm.length, words.length);
    };

    /** A handle for this session as it is now, when the setup asked for resumption. */
    const resumptionUpdate = () => {
      if (!conn.setup?.sessionResumption) return;
      const handle = `live-handle-${++handleSeq}`;
      handles.add(handle);
      conn.send({ sessionResumptionUpdate: { newHandle: handle, resumable: true } });
    };

    const finish = (run: { stop: boolean }, samples: number, words: number) => {
      if (run.stop || streaming !== run) return;
      streaming = null;
      conn.send({ serverContent: { generationComplete: true } });
      conn.send({ serverContent: { turnComplete: true } });
      conn.turnsCompleted++;
      resumptionUpdate();
      if (s.goAwayAfterTurns !== undefined && conn.turnsCompleted === s.goAwayAfterTurns) {
        conn.send({ goAway: { timeLeft: '0.1s' } });
        timers.later(s.goAwayCloseMs ?? 100, () => conn.close(1000, 'connection lifetime reached'));
      }
      conn.send({ usageMetadata: { promptTokenCount: 100 + conn.messages.length, responseTokenCount: Math.ceil(samples / 960) + words, totalTokenCount: 100 + conn.messages.length + Math.ceil(samples / 960) + words } });
      const idle = idleReplies;
      idleReplies = [];
      for (const ctx of idle) void respond(ctx);
    };

    const declarations = () => {
      const byName = new Map<string, string | undefined>();
      for (const t of (conn.setup?.tools as Array<{ functionDeclarations?: Array<{ name: string; behavior?: string }> }> | undefined) ?? []) {
        for (const d of t.functionDeclarations ?? []) byName.set(d.name, d.behavior);
      }
      return byName;
    };

    const heard = (pcm: Buffer) => {
      const loud = rms(pcm) >= SPEECH_RMS;
      if (!loud) return;
      if (!callerSpeaking) {
        callerSpeaking = true;
        if (s.voiceActivity) conn.send({ voiceActivity: { voiceActivityType: 'ACTIVITY_START' } });
        interrupt();
      }
      if (silenceTimer) clearTimeout(silenceTimer);
      const vad = (conn.setup?.realtimeInputConfig as { automaticActivityDetection?: { silenceDurationMs?: number } } | undefined)?.automaticActivityDetection;
      silenceTimer = timers.later(vad?.silenceDurationMs ?? 500, () => {
        silenceTimer = null;
        callerSpeaking = false;
        if (s.voiceActivity) conn.send({ voiceActivity: { voiceActivityType: 'ACTIVITY_END' } });
        const said = s.userTranscripts?.shift() ?? '';
        const words = said.split(/\s+/).filter(Boolean);
        for (const [i, w] of words.entries()) conn.send({ serverContent: { inputTranscription: { text: i === 0 ? w : ` ${w}` } } });
        if (words.length > 0) conn.send({ serverContent: { inputTranscription: { finished: true } } });
        void respond({ connection: conn, trigger: 'speech', text: said });
      });
    };

    ws.on('message', (data: WebSocket.RawData) => {
      let m: ClientMessage;
      try {
        m = JSON.parse(data.toString()) as ClientMessage;
      } catch {
        return conn.close(1007, 'Invalid JSON payload received.');
      }
      conn.messages.push(m);
      if (!conn.setup) {
        const setup = m.setup as Record<string, unknown> | undefined;
        if (!setup) return conn.close(1007, 'The first message must be setup.');
        const model = String(setup.model ?? '').replace(/^models\//, '');
        conn.model = model;
        s = layered(script, script.perConnection?.({ model, url }));
        const problem = setupProblem(setup, s.models ?? FAKE_LIVE_MODELS);
        if (problem) return conn.close(problem.code, problem.reason);
        const resume = (setup.sessionResumption as { handle?: string } | undefined)?.handle;
        if (resume !== undefined && !handles.has(resume)) return conn.close(1007, 'Invalid session resumption handle.');
        conn.setup = setup;
        conn.resumedFrom = resume ?? null;
        conn.instructions = textOf(setup.systemInstruction);
        conn.functions = namesOf(setup.tools);
        if (s.silent) return;
        conn.send({ setupComplete: {} });
        resumptionUpdate();
        if (s.closeAfterSetup) conn.close(s.closeAfterSetup.code, s.closeAfterSetup.reason);
        return;
      }
      if (s.silentAfterSetup) return;
      if (m.realtimeInput) {
        const audio = (m.realtimeInput as { audio?: { data?: string; mimeType?: string } }).audio;
        if (!audio?.data) return;
        conn.mimeTypes.add(String(audio.mimeType));
        const pcm = Buffer.from(audio.data, 'base64');
        conn.audio.push(pcm);
        heard(pcm);
      } else if (m.clientContent) {
        const cc = m.clientContent as { turns?: Array<{ role?: string; parts?: unknown[] }>; turnComplete?: boolean };
        if (cc.turns?.some((t) => t.role !== 'user' && t.role !== 'model')) return conn.close(1007, 'Invalid value at content.role');
        interrupt(); // a client message interrupts the model's generation
        if (cc.turnComplete) void respond({ connection: conn, trigger: 'client', text: (cc.turns ?? []).map(textOf).join('\n') });
      } else if (m.toolResponse) {
        const responses = ((m.toolResponse as { functionResponses?: Array<Record<string, unknown>> }).functionResponses ?? []);
        for (const r of responses) {
          const id = String(r.id ?? '');
          if (outstanding.get(id) !== r.name) return conn.close(1007, `Function response ${id} (${String(r.name)}) matches no pending function call.`);
          if (!r.response || typeof r.response !== 'object' || Array.isArray(r.response)) return conn.close(1007, 'Invalid value at function_response.response (Struct)');
          outstanding.delete(id);
        }
        const ctx: ReplyContext = { connection: conn, trigger: 'tool', text: '', functionResponses: responses };
        if (waitingTools) {
          waitingTools = false;
          streaming = null;
          void respond(ctx);
          return;
        }
        const scheduling = responses.map((r) => r.scheduling).find(Boolean) ?? 'WHEN_IDLE';
        if (scheduling === 'SILENT') return;
        if (scheduling === 'INTERRUPT') interrupt();
        if (streaming) idleReplies.push(ctx);
        else void respond(ctx);
      } else if (m.contextUpdate) {
        const cu = m.contextUpdate as { systemInstruction?: unknown; tools?: { tools?: unknown } };
        if (cu.systemInstruction !== undefined) conn.instructions = textOf(cu.systemInstruction);
        if (cu.tools !== undefined) {
          if (!Array.isArray(cu.tools.tools)) return conn.close(1007, 'Invalid value at context_update.tools');
          conn.functions = namesOf(cu.tools.tools);
          conn.setup = { ...conn.setup, tools: cu.tools.tools };
        }
      } else {
        conn.close(1007, 'Unknown client message.');
      }
    });
  }

  const { url } = await listenLocal(server);
  return {
    url,
    apiKey,
    connections,
    script,
    close: () => shutDown(server, { timers: timers.pending, webSockets: sockets, wss }),
  };
}

/** What Google refuses in a `setup`: an unknown model (1008), anything malformed (1007). */
function setupProblem(setup: Record<string, unknown>, models: string[]): { code: number; reason: string } | null {
  const model = String(setup.model ?? '');
  if (!model.startsWith('models/') || !models.includes(model.slice('models/'.length))) {
    return { code: 1008, reason: `${model} is not found for API version v1beta, or is not supported for bidiGenerateContent.` };
  }
  const gen = (setup.generationConfig ?? {}) as { responseModalities?: string[]; speechConfig?: { voiceConfig?: { prebuiltVoiceConfig?: { voiceName?: string } } } };
  if (gen.responseModalities && (gen.responseModalities.length !== 1 || gen.responseModalities[0] !== 'AUDIO')) {
    return { code: 1007, reason: 'Invalid value at setup.generation_config.response_modalities' };
  }
  const voice = gen.speechConfig?.voiceConfig?.prebuiltVoiceConfig?.voiceName;
  if (voice !== undefined && !VOICES.includes(voice)) return { code: 1007, reason: `Voice ${voice} is not supported.` };
  for (const name of namesOf(setup.tools)) {
    if (!/^[a-zA-Z_][a-zA-Z0-9_.-]{0,63}$/.test(name)) return { code: 1007, reason: `Invalid function name ${name}` };
  }
  return null;
}
