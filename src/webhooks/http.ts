/**
 * Outbound webhook POSTs (undici). Only http(s). The host name is resolved once, inside the
 * connect step, and the socket connects to the very address that was checked: there is no window
 * for DNS rebinding between the check and the connection. Private, loopback, link-local and other
 * non-public targets are refused unless `allowPrivate` (WEBHOOK_ALLOW_PRIVATE=true). Redirects are
 * never followed; response bodies are read up to a cap.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Agent, buildConnector, errors as undiciErrors, request } from 'undici';
import { blockedAddressReason } from './addresses.js';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

export type WebhookHttpErrorCode =
  | 'INVALID_URL'
  | 'BLOCKED_ADDRESS'
  | 'DNS_FAILED'
  | 'CONNECTION_FAILED'
  | 'TIMEOUT';

export interface HttpResponse {
  ok: true;
  status: number;
  /** The body as text, at most `maxResponseBytes`. */
  body: string;
  /** The body was longer than the cap and was cut off. */
  bodyTooLarge: boolean;
  durationMs: number;
}

export interface HttpFailure {
  ok: false;
  code: WebhookHttpErrorCode;
  /**
   * What a tenant or a model may be told (`blocked address`, `connection failed`, …): the same
   * for every failure of one code, naming nothing of the network the server sits in.
   */
  reason: string;
  /** For the server log only: what went wrong in full (resolved addresses, socket errors). */
  detail: string;
  durationMs: number;
}

export type HttpOutcome = HttpResponse | HttpFailure;

/** Turns a host name into addresses (the system resolver by default; tests inject one). */
export type ResolveHost = (hostname: string) => Promise<{ address: string; family: number }[]>;

export interface WebhookHttpOptions {
  /** WEBHOOK_ALLOW_PRIVATE: allow private and loopback targets (the demo and the tests). */
  allowPrivate: boolean;
  /** Response bytes read at most. Default 64 KiB. */
  maxResponseBytes?: number;
  resolve?: ResolveHost;
}

export interface PostOptions {
  headers: Record<string, string>;
  body: string | Buffer;
  /** Total time for DNS, connect, sending and the whole answer. */
  timeoutMs: number;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

export class BlockedAddressError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.SB_BLOCKED_ADDRESS] as const;
  constructor(message: string) {
    super(ErrorCodes.SB_BLOCKED_ADDRESS, message);
  }
}
export class DnsError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.SB_DNS_FAILED] as const;
  constructor(message: string) {
    super(ErrorCodes.SB_DNS_FAILED, message);
  }
}

const systemResolve: ResolveHost = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/**
 * The reason of each failure code that tenants (the attempt log, a call's `errors`) and models
 * (a tool's error result) see; `detail` stays in the server log. DNS answers, addresses and
 * socket errors say what the server's network looks like, which is no tenant's business.
 */
export const PUBLIC_REASONS: Readonly<Record<Exclude<WebhookHttpErrorCode, 'TIMEOUT'>, string>> = {
  INVALID_URL: 'invalid URL',
  BLOCKED_ADDRESS: 'blocked address (only public addresses are allowed)',
  DNS_FAILED: 'could not resolve the host name',
  CONNECTION_FAILED: 'connection failed',
};

/** The tenant's view of a failure: its code's reason (a timeout says how long was waited). */
export function publicReason(code: WebhookHttpErrorCode, timeoutMs: number): string {
  return code === 'TIMEOUT' ? `timed out: no complete answer within ${timeoutMs / 1000} s` : PUBLIC_REASONS[code];
}

/**
 * An attempt's stored `error` as a tenant may see it. Attempts recorded before reasons were
 * public-only carry the full detail (`x resolves to 10.0.0.5; refused …`, `connection failed
 * (ECONNREFUSED)`): that detail is replaced by its reason when the attempt log is read.
 */
export function publicAttemptError(error: string | null): string | null {
  if (error === null) return null;
  for (const [pattern, reason] of RECORDED_DETAILS) {
    const m = pattern.exec(error);
    if (m) return `${error.slice(0, m.index)}${m[1]}${reason}`;
  }
  return error;
}

const RECORDED_DETAILS: readonly (readonly [RegExp, string])[] = [
  [/(^|: )\S+ resolves to \S+; refused to connect to [\s\S]*$/, PUBLIC_REASONS.BLOCKED_ADDRESS],
  [/(^|: )refused to connect to [\s\S]*$/, PUBLIC_REASONS.BLOCKED_ADDRESS],
  [/(^|: )could not resolve \S+: [\s\S]*$/, PUBLIC_REASONS.DNS_FAILED],
  [/(^|: )connection failed \([\s\S]*$/, PUBLIC_REASONS.CONNECTION_FAILED],
];

/** `https://host/path` without credentials or query string: safe for logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}

/** Checks a URL before any I/O: absolute http(s), a host, and (unless allowed) no blocked IP literal. */
export function urlProblem(url: string, allowPrivate: boolean): { code: WebhookHttpErrorCode; detail: string } | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { code: 'INVALID_URL', detail: 'not an absolute URL' };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    return { code: 'INVALID_URL', detail: `only http and https URLs are allowed, not ${u.protocol}` };
  }
  if (u.hostname === '') return { code: 'INVALID_URL', detail: 'the URL has no host' };
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && isIP(host)) {
    const reason = blockedAddressReason(host);
    if (reason) return { code: 'BLOCKED_ADDRESS', detail: refusal(host, reason) };
  }
  return null;
}

/** `reason` names the address (`loopback address`, …): see `blockedAddressReason`. */
const refusal = (address: string, reason: string) =>
  `refused to connect to ${address}: ${reason} (only public addresses are allowed; WEBHOOK_ALLOW_PRIVATE=true allows others)`;

/** The URL without its credentials, and those credentials as Basic authorization among `headers`. */
function withUrlCredentials(url: string, headers: Record<string, string>): { target: URL; headers: Record<string, string> } {
  const target = new URL(url);
  if (target.username !== '' || target.password !== '') {
    const user = decodeURIComponent(target.username);
    const pass = decodeURIComponent(target.password);
    headers.authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
    target.username = '';
    target.password = '';
  }
  return { target, headers };
}

/** One client per process: owns the connection pool; `close()` releases it. */
export class WebhookHttpClient {
  private readonly agent: Agent;
  private readonly maxResponseBytes: number;
  private readonly allowPrivate: boolean;

  constructor(options: WebhookHttpOptions) {
    this.allowPrivate = options.allowPrivate;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const resolve = options.resolve ?? systemResolve;
    const baseConnect = buildConnector({ timeout: 15_000 });
    const allowPrivate = this.allowPrivate;

    const connect: buildConnector.connector = (opts, callback) => {
      const hostname = opts.hostname;
      const pick = async (): Promise<string[]> => {
        if (isIP(hostname)) {
          const reason = allowPrivate ? null : blockedAddressReason(hostname);
          if (reason) throw new BlockedAddressError(refusal(hostname, reason));
          return [hostname];
        }
        let addresses: { address: string; family: number }[];
        try {
          addresses = await resolve(hostname);
        } catch (err) {
          throw new DnsError(`could not resolve ${hostname}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
        }
        if (addresses.length === 0) throw new DnsError(`could not resolve ${hostname}: no address`);
        const usable = allowPrivate ? addresses : addresses.filter((a) => blockedAddressReason(a.address) === null);
        if (usable.length === 0) {
          const first = addresses[0]!.address;
          throw new BlockedAddressError(`${hostname} resolves to ${first}; ${refusal(first, blockedAddressReason(first)!)}`);
        }
        // IPv4 first: containers often have no IPv6 route
        return [...usable.filter((a) => a.family === 4), ...usable.filter((a) => a.family !== 4)].map((a) => a.address);
      };
      // connect to a checked address (the next one if it fails); TLS still verifies the host name
      const tryFrom = (addresses: string[], i: number) => {
        baseConnect({ ...opts, hostname: addresses[i]! }, (err, socket) => {
          if (err && i + 1 < addresses.length) tryFrom(addresses, i + 1);
          else if (err) callback(err, null);
          else callback(null, socket!);
        });
      };
      pick().then(
        (addresses) => tryFrom(addresses, 0),
        (err: Error) => callback(err, null),
      );
    };

    this.agent = new Agent({
      connect,
      keepAliveTimeout: 4_000,
      connections: 32,
      // a slow or silent endpoint is bounded by the caller's total deadline
      headersTimeout: 0,
      bodyTimeout: 0,
    });
  }

  /** POSTs once. Never throws: every failure is an `HttpFailure` with a stable code. */
  async post(url: string, options: PostOptions): Promise<HttpOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const problem = urlProblem(url, this.allowPrivate);
    if (problem) return { ok: false, ...problem, reason: publicReason(problem.code, options.timeoutMs), durationMs: 0 };

    const { target, headers } = withUrlCredentials(url, { ...options.headers });

    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), options.timeoutMs);
    try {
      const response = await request(target, {
        dispatcher: this.agent,
        method: 'POST',
        headers,
        body: options.body,
        signal: controller.signal,
      });
      let size = 0;
      let tooLarge = false;
      const chunks: Buffer[] = [];
      for await (const chunk of response.body) {
        const buf = chunk as Buffer;
        if (size + buf.length > this.maxResponseBytes) {
          chunks.push(buf.subarray(0, this.maxResponseBytes - size));
          tooLarge = true;
          response.body.destroy();
          break;
        }
        size += buf.length;
        chunks.push(buf);
      }
      return {
        ok: true,
        status: response.statusCode,
        body: Buffer.concat(chunks).toString('utf8'),
        bodyTooLarge: tooLarge,
        durationMs: elapsed(),
      };
    } catch (err) {
      const { code, detail } = describeError(err, controller.signal.aborted, options.timeoutMs);
      return { ok: false, code, reason: publicReason(code, options.timeoutMs), detail, durationMs: elapsed() };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * GETs a file (a background clip) under the same address rules as a webhook: at most
   * `maxBytes` (a longer body is a failure, `tooLarge`), redirects not followed. Never throws.
   */
  async get(
    url: string,
    options: { timeoutMs: number; maxBytes: number },
  ): Promise<{ ok: true; status: number; body: Buffer; tooLarge: boolean; durationMs: number } | HttpFailure> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const problem = urlProblem(url, this.allowPrivate);
    if (problem) return { ok: false, ...problem, reason: publicReason(problem.code, options.timeoutMs), durationMs: 0 };
    const { target, headers } = withUrlCredentials(url, { accept: 'audio/wav, audio/x-wav, */*' });
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), options.timeoutMs);
    try {
      const response = await request(target, { dispatcher: this.agent, method: 'GET', headers, signal: controller.signal });
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) {
        response.body.destroy();
        return { ok: true, status: response.statusCode, body: Buffer.alloc(0), tooLarge: true, durationMs: elapsed() };
      }
      let size = 0;
      const chunks: Buffer[] = [];
      for await (const chunk of response.body) {
        const buf = chunk as Buffer;
        size += buf.length;
        if (size > options.maxBytes) {
          response.body.destroy();
          return { ok: true, status: response.statusCode, body: Buffer.alloc(0), tooLarge: true, durationMs: elapsed() };
        }
        chunks.push(buf);
      }
      return { ok: true, status: response.statusCode, body: Buffer.concat(chunks), tooLarge: false, durationMs: elapsed() };
    } catch (err) {
      const { code, detail } = describeError(err, controller.signal.aborted, options.timeoutMs);
      return { ok: false, code, reason: publicReason(code, options.timeoutMs), detail, durationMs: elapsed() };
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

function describeError(
  err: unknown,
  timedOut: boolean,
  timeoutMs: number,
): { code: WebhookHttpErrorCode; detail: string } {
  const e = err as Error & { code?: string; cause?: unknown };
  if (e instanceof BlockedAddressError) return { code: 'BLOCKED_ADDRESS', detail: e.message };
  if (e instanceof DnsError) return { code: 'DNS_FAILED', detail: e.message };
  if (timedOut || e instanceof undiciErrors.ConnectTimeoutError) {
    return { code: 'TIMEOUT', detail: `no complete answer within ${timeoutMs / 1000} s` };
  }
  const code = e.code ?? (e.cause as { code?: string } | undefined)?.code;
  return {
    code: 'CONNECTION_FAILED',
    detail: code ? `connection failed (${code})` : `connection failed (${e.message})`,
  };
}
