/**
 * A local stand-in for Twilio, for tests, `npm run demo` and `npm run call`: a real HTTP server
 * that speaks Twilio's REST API wire format for calls (create, fetch, list, update, delete;
 * form-encoded, HTTP Basic auth, Twilio's JSON resources and errors), and plays the callee of
 * each outbound call it places: status callbacks, answering-machine detection, the TwiML request,
 * and the Media Streams socket with a simulated person or voicemail on it. It can also place an
 * inbound call (a `SimulatedCall`) that its REST API then controls. See docs/twilio-standin.md.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SimulatedCall, mediaLegOf, type SimulatedCallOptions } from './caller.js';
import { API_VERSION, StandInCall, type CalleeBehaviour, type CallContext } from './twilio-call.js';
import { Conferences, type StandInConference } from './conference.js';

export { StandInCall, DEFAULT_GREETING } from './twilio-call.js';
export type { StandInConference, ConferenceParticipant } from './conference.js';
export type { CalleeBehaviour, CallbackRecord, CallStatus, CallbackStatus, PersonCallee, VoicemailCallee, VoicemailRecord } from './twilio-call.js';

export interface TwilioStandInOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (any free port). */
  port?: number;
  /**
   * Accounts the REST API knows, SID → auth token: a request must authenticate as the account in
   * its path, or it is a 401 (code 20003). Without it, any Basic credentials are taken, and the
   * password signs that call's callbacks.
   */
  accounts?: Record<string, string>;
  /** Callee behaviour by `To` number. */
  callees?: Record<string, CalleeBehaviour>;
  /** For a `To` with no behaviour of its own (default: a person). */
  defaultCallee?: CalleeBehaviour;
  /**
   * An update (`POST .../Calls/{sid}.json`) for a call the stand-in never saw is taken as one
   * for an inbound call in progress (200, recorded) instead of a 404: for Switchboard's inbound
   * calls placed with `SimulatedCall` straight at its voice webhook.
   */
  adoptUnknownCalls?: boolean;
  /** Each media leg records its audio both ways. */
  recordAudio?: boolean;
  /** Milliseconds from the REST create to `initiated`, and from `initiated` to `ringing` (default 10). */
  queueMs?: number;
}

/** One REST request as it came in. */
export interface StandInRequest {
  method: string;
  /** The request target, query string included. */
  path: string;
  /** The form-encoded body. */
  form: URLSearchParams;
  /** The Basic auth user (the account SID), when given. */
  accountSid: string | null;
  /** The HTTP status it was answered with. */
  status: number;
  at: number;
}

export interface InboundCallOptions extends Omit<SimulatedCallOptions, 'authToken' | 'accountSid'> {
  /** Default: the only (or first) account of `options.accounts`. */
  accountSid?: string;
  /** Default: that account's token. */
  authToken?: string;
}

export interface TwilioStandIn {
  /** Base URL of the REST API: Switchboard's `TWILIO_API_BASE`. */
  url: string;
  requests: StandInRequest[];
  calls: StandInCall[];
  /** The call with this SID. */
  call(sid: string): StandInCall | undefined;
  /** The conference of that name (`<Dial><Conference>`), once a call entered it. */
  conference(name: string): StandInConference | undefined;
  /** Sets (or with null, removes) the behaviour of the callee at `number`, for calls placed from now on. */
  setCallee(number: string, behaviour: CalleeBehaviour | null): void;
  setDefaultCallee(behaviour: CalleeBehaviour): void;
  /** The first call (already placed or placed within `timeoutMs`) to `to`, or that `match` accepts. */
  waitForCall(match: string | ((call: StandInCall) => boolean), timeoutMs?: number): Promise<StandInCall>;
  /** An inbound call to Switchboard's voice webhook that this stand-in's REST API controls; `dial()` it. */
  inbound(options: InboundCallOptions): SimulatedCall;
  /** Ends every call (no callbacks), stops the server. */
  close(): Promise<void>;
}

const E164 = /^\+[1-9]\d{1,14}$/;
const isAddress = (n: string) => E164.test(n) || /^(sip|client):\S+$/.test(n);

const twilioError = (status: number, code: number, message: string) => ({
  code,
  message,
  more_info: `https://www.twilio.com/docs/errors/${code}`,
  status,
});

export async function startTwilioStandIn(options: TwilioStandInOptions = {}): Promise<TwilioStandIn> {
  const requests: StandInRequest[] = [];
  const calls: StandInCall[] = [];
  const deleted = new Set<string>();
  const callees = new Map<string, CalleeBehaviour>(Object.entries(options.callees ?? {}));
  let defaultCallee: CalleeBehaviour = options.defaultCallee ?? { kind: 'person' };
  const closing = new AbortController();
  const inboundCallers: SimulatedCall[] = [];
  const conferences = new Conferences();

  const context = (authToken: string): CallContext => ({
    authToken,
    conferences,
    signal: closing.signal,
    recordAudio: options.recordAudio ?? false,
    queueMs: options.queueMs ?? 10,
  });
  const find = (accountSid: string, sid: string) => calls.find((c) => c.sid === sid && c.accountSid === accountSid && !deleted.has(sid));

  const reply = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(body === null ? undefined : JSON.stringify(body));
    return status;
  };

  function createCall(res: ServerResponse, accountSid: string, token: string, form: URLSearchParams): number {
    const to = form.get('To');
    const from = form.get('From');
    if (!to) return reply(res, 400, twilioError(400, 21201, "No 'To' number is specified"));
    if (!isAddress(to)) return reply(res, 400, twilioError(400, 21211, `The 'To' number ${to} is not a valid phone number.`));
    if (!from) return reply(res, 400, twilioError(400, 21213, "No 'From' number is specified"));
    if (!isAddress(from)) {
      return reply(res, 400, twilioError(400, 21212, `The 'From' number ${from} is not a valid phone number, shortcode, or alphanumeric sender ID.`));
    }
    const url = form.get('Url');
    if (!url && !form.get('Twiml')) return reply(res, 400, twilioError(400, 21205, "Either 'Url' or 'Twiml' must be specified"));
    if (url && !/^https?:\/\/\S+$/i.test(url)) return reply(res, 400, twilioError(400, 21205, `Url is not a valid URL: ${url}`));
    const md = form.get('MachineDetection');
    if (md !== null && md !== 'Enable' && md !== 'DetectMessageEnd') {
      return reply(res, 400, twilioError(400, 21206, `MachineDetection must be 'Enable' or 'DetectMessageEnd', not ${md}`));
    }
    const callee = callees.get(to) ?? defaultCallee;
    if (callee.kind === 'reject') {
      const code = callee.code ?? 21215;
      const message =
        callee.message ??
        `Account not authorized to call ${to}. Perhaps you need to enable some international permissions: https://www.twilio.com/console/voice/calls/geo-permissions/low-risk`;
      return reply(res, 400, twilioError(400, code, message));
    }
    const call = new StandInCall(context(token), accountSid, to, from, new URLSearchParams(form), callee);
    calls.push(call);
    call.start();
    return reply(res, 201, call.toResource());
  }

  function listCalls(res: ServerResponse, accountSid: string, query: URLSearchParams): number {
    const pageSize = Math.min(Number(query.get('PageSize') ?? 50) || 50, 1000);
    const matching = calls
      .filter((c) => c.accountSid === accountSid && !deleted.has(c.sid))
      .filter((c) => (!query.get('To') || c.to === query.get('To')) && (!query.get('From') || c.from === query.get('From')))
      .filter((c) => !query.get('Status') || c.status === query.get('Status'))
      .reverse()
      .slice(0, pageSize);
    const uri = `/${API_VERSION}/Accounts/${accountSid}/Calls.json?PageSize=${pageSize}&Page=0`;
    return reply(res, 200, {
      calls: matching.map((c) => c.toResource()),
      end: Math.max(matching.length - 1, 0),
      first_page_uri: uri,
      next_page_uri: null,
      page: 0,
      page_size: pageSize,
      previous_page_uri: null,
      start: 0,
      uri,
    });
  }

  function route(req: IncomingMessage, res: ServerResponse, body: string): number {
    const target = new URL(req.url ?? '/', 'http://stand-in');
    const form = new URLSearchParams(body);
    const notFound = () => reply(res, 404, twilioError(404, 20404, `The requested resource ${target.pathname} was not found`));
    const m = /^\/2010-04-01\/Accounts\/([^/]+)\/Calls(?:\/([^/]+))?\.json$/.exec(target.pathname);
    if (!m) return notFound();
    const accountSid = decodeURIComponent(m[1]!);
    const sid = m[2] === undefined ? null : decodeURIComponent(m[2]);

    const auth = basicAuth(req);
    let token = auth?.password ?? '';
    if (options.accounts) {
      const known = options.accounts[accountSid];
      if (!auth || auth.user !== accountSid || known === undefined || auth.password !== known) {
        return reply(
          res,
          401,
          { ...twilioError(401, 20003, 'Authenticate'), detail: 'Your AccountSid or AuthToken was incorrect.' },
          { 'www-authenticate': 'Basic realm="Twilio API"' },
        );
      }
      token = known;
    }

    if (sid === null) {
      if (req.method === 'POST') return createCall(res, accountSid, token, form);
      if (req.method === 'GET') return listCalls(res, accountSid, target.searchParams);
      return reply(res, 405, twilioError(405, 20004, 'Method not allowed'));
    }
    let call = find(accountSid, sid);
    if (!call && req.method === 'POST' && options.adoptUnknownCalls) {
      call = new StandInCall(context(token), accountSid, '', '', new URLSearchParams(), null, 'inbound', sid);
      calls.push(call);
    }
    if (!call) return notFound();
    if (req.method === 'GET') return reply(res, 200, call.toResource());
    if (req.method === 'DELETE') {
      deleted.add(sid);
      return reply(res, 204, null);
    }
    if (req.method !== 'POST') return reply(res, 405, twilioError(405, 20004, 'Method not allowed'));
    const error = call.update(form);
    if (error) return reply(res, 400, twilioError(400, error.code, error.message));
    return reply(res, 200, call.toResource());
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const record: StandInRequest = {
        method: req.method ?? 'GET',
        path: req.url ?? '',
        form: new URLSearchParams(body),
        accountSid: basicAuth(req)?.user ?? null,
        status: 0,
        at: Date.now(),
      };
      requests.push(record);
      try {
        record.status = route(req, res, body);
      } catch (err) {
        record.status = reply(res, 500, twilioError(500, 20500, `Internal Server Error: ${(err as Error).message}`));
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${options.host ?? '127.0.0.1'}:${port}`;

  return {
    url,
    requests,
    calls,
    call: (sid) => calls.find((c) => c.sid === sid),
    conference: (name) => conferences.get(name),
    setCallee(number, behaviour) {
      if (behaviour) callees.set(number, behaviour);
      else callees.delete(number);
    },
    setDefaultCallee(behaviour) {
      defaultCallee = behaviour;
    },
    async waitForCall(match, timeoutMs = 10_000) {
      const test = typeof match === 'string' ? (c: StandInCall) => c.to === match : match;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = calls.find(test);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`timed out waiting for a call${typeof match === 'string' ? ` to ${match}` : ''}; calls: ${calls.map((c) => c.to).join(', ') || 'none'}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    inbound(o) {
      const accounts = Object.entries(options.accounts ?? {});
      const accountSid = o.accountSid ?? accounts[0]?.[0] ?? `AC${'0'.repeat(32)}`;
      const authToken = o.authToken ?? options.accounts?.[accountSid];
      if (authToken === undefined) throw new Error(`no auth token for account ${accountSid}: pass authToken or list the account in options.accounts`);
      const caller = new SimulatedCall({ ...o, accountSid, authToken });
      const call = new StandInCall(context(authToken), accountSid, o.to, o.from ?? '+15005550006', new URLSearchParams(), null, 'inbound', caller.callSid);
      calls.push(call);
      call.attachLeg(mediaLegOf(caller));
      inboundCallers.push(caller);
      return caller;
    },
    async close() {
      closing.abort();
      await Promise.all(calls.map((c) => c.dispose()));
      await Promise.all(inboundCallers.map((c) => c.close().catch(() => undefined)));
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

function basicAuth(req: IncomingMessage): { user: string; password: string } | null {
  const header = req.headers.authorization;
  if (!header?.startsWith('Basic ')) return null;
  const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
