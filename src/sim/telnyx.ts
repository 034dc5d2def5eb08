/**
 * A local stand-in for Telnyx, for tests and `npm run call -- --standin --carrier telnyx`: a real
 * HTTP server speaking Telnyx's Call Control API for calls (`POST /v2/calls`, the commands under
 * `/v2/calls/{call_control_id}/actions/`, `GET /v2/calls/{id}`; JSON, `Authorization: Bearer`,
 * Telnyx's `{data}` answers and `{errors: [{code, title, detail}]}` refusals), the Call Control
 * webhooks of its calls signed with its own Ed25519 key (its `publicKey` is what an account
 * verifies them with), and the party on each call's media stream. It dials simulated callees and
 * places calls to Switchboard (`inbound`). See docs/telnyx.md, "The stand-in".
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { telnyxKeyPair, telnyxSignature } from '../telephony/telnyx/signature.js';
import { TelnyxStandInCall, type TelnyxCallContext, type TelnyxCallee } from './telnyx-call.js';

export { TelnyxStandInCall, DEFAULT_GREETING } from './telnyx-call.js';
export type { TelnyxCallee, TelnyxCommand, TelnyxPersonCallee, TelnyxVoicemailCallee, TelnyxWebhookRecord } from './telnyx-call.js';

export interface TelnyxStandInOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (any free port). */
  port?: number;
  /** The API keys it takes (else a 401); unset: any Bearer key. */
  apiKeys?: string[];
  /**
   * Call Control applications (connections) by id, each with its webhook URL (where the calls of
   * a dial without `webhook_url`, and the calls `inbound` places, send their webhooks). Unset: any
   * connection id is taken.
   */
  connections?: Record<string, string | null>;
  /** Callee behaviour by `to` number. */
  callees?: Record<string, TelnyxCallee>;
  /** For a `to` with no behaviour of its own (default: a person). */
  defaultCallee?: TelnyxCallee;
  /** Each media leg records its audio both ways. */
  recordAudio?: boolean;
  /** Milliseconds from a dial to `call.initiated` (default 10). */
  queueMs?: number;
}

/** One API request as it came. */
export interface TelnyxRequest {
  method: string;
  path: string;
  body: Record<string, unknown> | null;
  /** The Bearer key, when given. */
  apiKey: string | null;
  /** The HTTP status it was answered with. */
  status: number;
  at: number;
}

export interface TelnyxInboundOptions {
  /** Where its webhooks go (Switchboard's `/telephony/telnyx/webhook`); default the connection's. */
  webhookUrl?: string;
  to: string;
  /** Default +15005550006. */
  from?: string;
  /** Default the first of `connections`, else `standin-connection`. */
  connectionId?: string;
}

export interface TelnyxStandIn {
  /** Base URL: Switchboard's `TELNYX_API_BASE` (the API is under `/v2`). */
  url: string;
  /** Base64 of the stand-in's Ed25519 public key: an account's `telnyx.public_key`. */
  publicKey: string;
  /** The headers Telnyx would sign `body` with, at `timestamp` (seconds; default now). */
  signedHeaders(body: string, timestamp?: number): { 'telnyx-signature-ed25519': string; 'telnyx-timestamp': string };
  requests: TelnyxRequest[];
  calls: TelnyxStandInCall[];
  /** The call with this `call_control_id`. */
  call(callControlId: string): TelnyxStandInCall | undefined;
  setCallee(number: string, behaviour: TelnyxCallee | null): void;
  setDefaultCallee(behaviour: TelnyxCallee): void;
  setConnection(id: string, webhookUrl: string | null): void;
  /** The first call (already dialled or dialled within `timeoutMs`) to `to`, or that `match` accepts. */
  waitForCall(match: string | ((call: TelnyxStandInCall) => boolean), timeoutMs?: number): Promise<TelnyxStandInCall>;
  /** A call to Switchboard through this stand-in: `dial()` it, then talk on it as on any leg. */
  inbound(options: TelnyxInboundOptions): TelnyxStandInCall;
  /** Ends every call (no webhooks), stops the server. */
  close(): Promise<void>;
}

const ADDRESS = /^(\+[1-9]\d{1,14}|sip:\S+)$/;
type TelnyxError = { code: string; title: string; detail: string; source?: { pointer: string } };
const errors = (...list: TelnyxError[]) => ({ errors: list });

export async function startTelnyxStandIn(options: TelnyxStandInOptions = {}): Promise<TelnyxStandIn> {
  const requests: TelnyxRequest[] = [];
  const calls: TelnyxStandInCall[] = [];
  const callees = new Map<string, TelnyxCallee>(Object.entries(options.callees ?? {}));
  const connections = new Map<string, string | null>(Object.entries(options.connections ?? {}));
  let defaultCallee: TelnyxCallee = options.defaultCallee ?? { kind: 'person' };
  const closing = new AbortController();
  const keys = telnyxKeyPair();
  /** Dials by `command_id`: a dial sent again is the same call. */
  const dials = new Map<string, TelnyxStandInCall>();
  /** Commands by call and `command_id`: one sent again is taken once. */
  const commandsSeen = new Set<string>();

  const context: TelnyxCallContext = {
    privateKey: keys.privateKey,
    signal: closing.signal,
    recordAudio: options.recordAudio ?? false,
    queueMs: options.queueMs ?? 10,
    refusal: (to) => {
      const callee = callees.get(to);
      if (callee?.kind !== 'reject') return null;
      return { code: callee.code ?? '10010', title: callee.title ?? 'Destination not allowed', detail: callee.detail ?? `Calls to ${to} are not allowed for this account.` };
    },
  };
  const find = (id: string) => calls.find((c) => c.callControlId === id);

  const reply = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify(body));
    return status;
  };

  function dial(res: ServerResponse, body: Record<string, unknown>): number {
    const invalid = (field: string, detail: string) =>
      reply(res, 422, errors({ code: '10015', title: 'Invalid value', detail, source: { pointer: `/${field}` } }));
    const connectionId = body.connection_id;
    if (typeof connectionId !== 'string' || connectionId === '') return invalid('connection_id', 'connection_id is required.');
    if (options.connections && !connections.has(connectionId)) return invalid('connection_id', `There is no connection with id ${connectionId}.`);
    const to = body.to;
    if (typeof to !== 'string' || !ADDRESS.test(to)) return invalid('to', 'to must be an E.164 number or a SIP URI.');
    const from = body.from;
    if (typeof from !== 'string' || !ADDRESS.test(from)) return invalid('from', 'from must be an E.164 number or a SIP URI.');
    if (body.client_state !== undefined && (typeof body.client_state !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(body.client_state))) {
      return invalid('client_state', 'client_state must be a valid Base-64 encoded string.');
    }
    const commandId = typeof body.command_id === 'string' ? body.command_id : null;
    const earlier = commandId ? dials.get(commandId) : undefined;
    const callee = callees.get(to) ?? defaultCallee;
    const refused = context.refusal(to);
    if (!earlier && refused) return reply(res, 422, errors(refused));
    let call = earlier;
    if (!call) {
      const webhookUrl = typeof body.webhook_url === 'string' ? body.webhook_url : (connections.get(connectionId) ?? null);
      call = new TelnyxStandInCall(context, 'outgoing', to, from, connectionId, webhookUrl, { ...body }, callee);
      calls.push(call);
      if (commandId) dials.set(commandId, call);
      call.start();
    }
    return reply(res, 200, {
      data: {
        call_control_id: call.callControlId,
        call_leg_id: call.callLegId,
        call_session_id: call.callSessionId,
        is_alive: false,
        record_type: 'call',
        ...(call.clientState ? { client_state: call.clientState } : {}),
      },
    });
  }

  function action(res: ServerResponse, id: string, name: string, body: Record<string, unknown>): number {
    const call = find(id);
    if (!call) return reply(res, 404, errors({ code: '10005', title: 'Resource not found', detail: 'The requested resource or URL could not be found.' }));
    const commandId = typeof body.command_id === 'string' ? `${id} ${body.command_id}` : null;
    if (commandId && commandsSeen.has(commandId)) return reply(res, 200, { data: { result: 'ok' } });
    const refused = call.command(name, body);
    if (refused) return reply(res, 422, errors(refused));
    if (commandId) commandsSeen.add(commandId);
    return reply(res, 200, { data: { result: 'ok' } });
  }

  function status(res: ServerResponse, id: string): number {
    const call = find(id);
    if (!call) return reply(res, 404, errors({ code: '10005', title: 'Resource not found', detail: 'The requested resource or URL could not be found.' }));
    return reply(res, 200, {
      data: {
        call_control_id: call.callControlId,
        call_leg_id: call.callLegId,
        call_session_id: call.callSessionId,
        is_alive: !call.final,
        record_type: 'call',
        ...(call.clientState ? { client_state: call.clientState } : {}),
        start_time: new Date(call.createdAt).toISOString(),
        ...(call.endedAt !== null
          ? { end_time: new Date(call.endedAt).toISOString(), call_duration: call.answeredAt === null ? 0 : Math.ceil((call.endedAt - call.answeredAt) / 1000) }
          : {}),
      },
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const path = req.url ?? '/';
    const method = req.method ?? 'GET';
    const auth = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '');
    const record: TelnyxRequest = { method, path, body: null, apiKey: auth?.[1] ?? null, status: 0, at: Date.now() };
    requests.push(record);
    if (!auth || (options.apiKeys && !options.apiKeys.includes(auth[1]!))) {
      record.status = reply(res, 401, errors({ code: '10009', title: 'Authentication failed', detail: 'The API key looks malformed. Check that you copied it correctly.' }));
      return;
    }
    let body: Record<string, unknown> = {};
    if (raw !== '') {
      try {
        const parsed: unknown = JSON.parse(raw);
        if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
        body = parsed as Record<string, unknown>;
      } catch {
        record.status = reply(res, 400, errors({ code: '10002', title: 'Invalid JSON', detail: 'The request body is not a JSON object.' }));
        return;
      }
    }
    record.body = body;
    const route = new URL(path, 'http://x').pathname;
    const actionMatch = /^\/v2\/calls\/([^/]+)\/actions\/([a-z_]+)$/.exec(route);
    const callMatch = /^\/v2\/calls\/([^/]+)$/.exec(route);
    if (method === 'POST' && route === '/v2/calls') record.status = dial(res, body);
    else if (method === 'POST' && actionMatch) record.status = action(res, decodeURIComponent(actionMatch[1]!), actionMatch[2]!, body);
    else if (method === 'GET' && callMatch) record.status = status(res, decodeURIComponent(callMatch[1]!));
    else record.status = reply(res, 404, errors({ code: '10005', title: 'Resource not found', detail: `${method} ${route} is not simulated.` }));
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) reply(res, 500, errors({ code: '10007', title: 'Unexpected error', detail: (err as Error).message }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? '127.0.0.1';
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    url,
    publicKey: keys.publicKey,
    signedHeaders(body, timestamp = Math.floor(Date.now() / 1000)) {
      const t = String(timestamp);
      return { 'telnyx-signature-ed25519': telnyxSignature(keys.privateKey, t, body), 'telnyx-timestamp': t };
    },
    requests,
    calls,
    call: find,
    setCallee(number, behaviour) {
      if (behaviour) callees.set(number, behaviour);
      else callees.delete(number);
    },
    setDefaultCallee(behaviour) {
      defaultCallee = behaviour;
    },
    setConnection(id, webhookUrl) {
      connections.set(id, webhookUrl);
    },
    async waitForCall(match, timeoutMs = 10_000) {
      const test = typeof match === 'string' ? (c: TelnyxStandInCall) => c.direction === 'outgoing' && c.to === match : match;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = calls.find(test);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no Telnyx call ${typeof match === 'string' ? `to ${match}` : 'matching'} within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    inbound(o) {
      const connectionId = o.connectionId ?? [...connections.keys()][0] ?? 'standin-connection';
      const webhookUrl = o.webhookUrl ?? connections.get(connectionId) ?? null;
      const call = new TelnyxStandInCall(context, 'incoming', o.to, o.from ?? '+15005550006', connectionId, webhookUrl);
      calls.push(call);
      return call;
    },
    async close() {
      closing.abort();
      await Promise.all(calls.map((c) => c.dispose()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
