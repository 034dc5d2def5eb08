/**
 * SIP messages (RFC 3261 §7): parsing and writing, by hand (docs/sip.md says why). A message is
 * its start line, its headers in order (names lower-cased, compact forms expanded, one entry per
 * comma-separated value where the header is a list) and its body. Parsing never throws: what does
 * not parse is `{ ok: false, reason }`, and the endpoint counts it and drops it.
 */

export interface SipRequest {
  kind: 'request';
  method: string;
  uri: string;
  headers: SipHeaders;
  body: Buffer;
}

export interface SipResponse {
  kind: 'response';
  status: number;
  reason: string;
  headers: SipHeaders;
  body: Buffer;
}

export type SipMessage = SipRequest | SipResponse;

/** A message's headers: lower-case name → its values, in order. */
export type SipHeaders = Map<string, string[]>;

export type Parsed = { ok: true; message: SipMessage } | { ok: false; reason: string };

/** The largest message taken (UDP datagrams are smaller; a TCP stream is cut off past it). */
export const MAX_MESSAGE_BYTES = 16 * 1024;
const MAX_HEADERS = 100;

/** Compact header names, RFC 3261 §7.3.3. Maps, not object literals: a header named `constructor` or `__proto__` is a header like any other. */
const COMPACT = new Map(Object.entries({
  i: 'call-id', m: 'contact', e: 'content-encoding', l: 'content-length', c: 'content-type',
  f: 'from', s: 'subject', k: 'supported', t: 'to', v: 'via', r: 'refer-to', b: 'referred-by',
  o: 'event', u: 'allow-events', x: 'session-expires',
}));

/** Headers whose value is a comma-separated list (split into entries), RFC 3261 §7.3.1. */
const LIST_HEADERS = new Set(['via', 'contact', 'route', 'record-route', 'allow', 'supported', 'require', 'accept']);

/** How headers are written (the usual capitalization; unknown ones by their words). */
const CANONICAL = new Map(Object.entries({
  'call-id': 'Call-ID', cseq: 'CSeq', 'www-authenticate': 'WWW-Authenticate', 'content-length': 'Content-Length',
  'max-forwards': 'Max-Forwards', 'refer-to': 'Refer-To', 'referred-by': 'Referred-By',
}));

const TOKEN = /^[A-Za-z0-9\-.!%*_+`'~]+$/;

/** Splits a list header's value on commas outside quotes and angle brackets. */
export function splitList(value: string): string[] {
  const out: string[] = [];
  let depthAngle = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i];
    if (quoted) {
      if (ch === '\\') i++;
      else if (ch === '"') quoted = false;
    } else if (ch === '"') quoted = true;
    else if (ch === '<') depthAngle++;
    else if (ch === '>') depthAngle = Math.max(0, depthAngle - 1);
    else if (ch === ',' && depthAngle === 0) {
      out.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(value.slice(start).trim());
  return out.filter((v) => v !== '');
}

/** The end of a message's head (the blank line), or -1. */
export function headEnd(buf: Buffer, from = 0): number {
  return buf.indexOf('\r\n\r\n', from, 'latin1');
}

/**
 * One whole message (a UDP datagram, or a frame cut from a TCP stream by `SipStreamFramer`).
 * The body is what follows the blank line, cut to Content-Length.
 */
export function parseMessage(buf: Buffer): Parsed {
  if (buf.length > MAX_MESSAGE_BYTES) return { ok: false, reason: `message over ${MAX_MESSAGE_BYTES} bytes` };
  const end = headEnd(buf);
  if (end < 0) return { ok: false, reason: 'no blank line after the headers' };
  const head = buf.toString('latin1', 0, end);
  // header lines folded onto the next (a leading space or tab) join the one before
  const lines = head.replace(/\r\n[ \t]+/g, ' ').split('\r\n');
  const start = lines[0] ?? '';
  const headers: SipHeaders = new Map();
  if (lines.length - 1 > MAX_HEADERS) return { ok: false, reason: `more than ${MAX_HEADERS} header lines` };
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) return { ok: false, reason: `header line ${i} has no name` };
    let name = line.slice(0, colon).trim().toLowerCase();
    if (!TOKEN.test(name)) return { ok: false, reason: `header line ${i}: bad name` };
    name = COMPACT.get(name) ?? name;
    const value = line.slice(colon + 1).trim();
    const values = LIST_HEADERS.has(name) && value !== '*' ? splitList(value) : [value];
    const have = headers.get(name);
    if (have) have.push(...values);
    else headers.set(name, values);
  }
  let body = buf.subarray(end + 4);
  const lengthValue = headers.get('content-length')?.[0];
  if (lengthValue !== undefined) {
    if (!/^\d{1,6}$/.test(lengthValue)) return { ok: false, reason: 'Content-Length is not a number' };
    const length = Number(lengthValue);
    if (length > body.length) return { ok: false, reason: 'body shorter than Content-Length' };
    body = body.subarray(0, length);
  }
  for (const required of ['via', 'call-id', 'cseq', 'from', 'to']) {
    if (!headers.get(required)?.[0]) return { ok: false, reason: `no ${required} header` };
  }
  if (!parseCSeq(headers.get('cseq')![0]!)) return { ok: false, reason: 'bad CSeq' };
  const status = /^SIP\/2\.0 ([1-6]\d\d) ?(.*)$/.exec(start);
  if (status) return { ok: true, message: { kind: 'response', status: Number(status[1]), reason: status[2]!, headers, body } };
  const request = /^([A-Za-z0-9\-.!%*_+`'~]+) (\S+) SIP\/2\.0$/.exec(start);
  if (!request) return { ok: false, reason: 'bad start line' };
  if (!/^sips?:/i.test(request[2]!)) return { ok: false, reason: 'Request-URI is not a sip: URI' };
  return { ok: true, message: { kind: 'request', method: request[1]!.toUpperCase(), uri: request[2]!, headers, body } };
}

/** Writes a message; Content-Length is set from the body. */
export function serialize(m: SipMessage): Buffer {
  const lines: string[] = [m.kind === 'request' ? `${m.method} ${m.uri} SIP/2.0` : `SIP/2.0 ${m.status} ${m.reason}`];
  for (const [name, values] of m.headers) {
    if (name === 'content-length' || values.length === 0) continue;
    const written = CANONICAL.get(name) ?? name.replace(/(^|-)([a-z])/g, (_s, dash: string, c: string) => dash + c.toUpperCase());
    if (LIST_HEADERS.has(name) && name !== 'via') lines.push(`${written}: ${values.join(', ')}`);
    else for (const v of values) lines.push(`${written}: ${v}`);
  }
  lines.push(`Content-Length: ${m.body.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), m.body]);
}

// ---------------------------------------------------------------------------------------------
// header values

export const header = (m: SipMessage, name: string): string | undefined => m.headers.get(name)?.[0];

export function parseCSeq(value: string): { seq: number; method: string } | null {
  const r = /^(\d{1,10})\s+([A-Za-z]+)$/.exec(value.trim());
  if (!r) return null;
  const seq = Number(r[1]);
  return seq < 2 ** 31 ? { seq, method: r[2]!.toUpperCase() } : null;
}

/** `;name=value` parameters, names lower-cased; a flag has the value ''. */
export function parseParams(text: string): Map<string, string> {
  const params = new Map<string, string>();
  for (const part of text.split(';')) {
    const p = part.trim();
    if (!p) continue;
    const eq = p.indexOf('=');
    if (eq < 0) params.set(p.toLowerCase(), '');
    else params.set(p.slice(0, eq).trim().toLowerCase(), p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1'));
  }
  return params;
}

/** A From/To/Contact/Refer-To value: `"Name" <uri>;params` or `uri;params`. */
export interface NameAddr {
  name: string;
  uri: string;
  params: Map<string, string>;
}

export function parseNameAddr(value: string): NameAddr | null {
  const v = value.trim();
  const lt = v.indexOf('<');
  if (lt >= 0) {
    const gt = v.indexOf('>', lt);
    if (gt < 0) return null;
    return { name: v.slice(0, lt).trim().replace(/^"(.*)"$/, '$1'), uri: v.slice(lt + 1, gt).trim(), params: parseParams(v.slice(gt + 1)) };
  }
  const semi = v.indexOf(';');
  const uri = semi < 0 ? v : v.slice(0, semi);
  if (!uri) return null;
  return { name: '', uri: uri.trim(), params: parseParams(semi < 0 ? '' : v.slice(semi)) };
}

export interface SipUri {
  scheme: 'sip' | 'sips';
  user: string;
  host: string;
  port: number | null;
  params: Map<string, string>;
}

/** `sip:user@host:port;params?headers` (the user part unescaped). */
export function parseUri(text: string): SipUri | null {
  const r = /^(sips?):(?:([^@?]*)@)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?((?:;[^?]*)?)(?:\?.*)?$/i.exec(text.trim());
  if (!r) return null;
  let user = r[2] ?? '';
  // telephone-subscriber parameters (`+15551234567;npdi;rn=+15559990000`, RFC 4694) go
  const semi = user.indexOf(';');
  if (semi >= 0) user = user.slice(0, semi);
  const colon = user.indexOf(':');
  if (colon >= 0) user = user.slice(0, colon); // user:password
  try {
    user = decodeURIComponent(user);
  } catch {
    return null;
  }
  const port = r[4] ? Number(r[4]) : null;
  if (port !== null && (port < 1 || port > 65_535)) return null;
  return { scheme: r[1]!.toLowerCase() as 'sip' | 'sips', user, host: r[3]!.replace(/^\[|\]$/g, ''), port, params: parseParams(r[5] ?? '') };
}

export interface Via {
  transport: string;
  host: string;
  port: number | null;
  params: Map<string, string>;
}

export function parseVia(value: string): Via | null {
  const r = /^SIP\s*\/\s*2\.0\s*\/\s*([A-Za-z]+)\s+(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?:\s*:\s*(\d{1,5}))?\s*(.*)$/i.exec(value.trim());
  if (!r) return null;
  return { transport: r[1]!.toUpperCase(), host: r[2]!.replace(/^\[|\]$/g, ''), port: r[3] ? Number(r[3]) : null, params: parseParams(r[4] ?? '') };
}

/** The tag of a From or To header, or ''. */
export function tagOf(value: string | undefined): string {
  return (value && parseNameAddr(value)?.params.get('tag')) ?? '';
}

export function randomToken(bytes = 8): string {
  let s = '';
  for (let i = 0; i < bytes; i++) s += Math.floor(Math.random() * 256).toString(16).padStart(2, '0');
  return s;
}

/** A new Via branch (RFC 3261's magic cookie, then randomness). */
export const newBranch = () => `z9hG4bK${randomToken(10)}`;

/**
 * A response to `request`: Via, From, To (with `toTag` added when it has none), Call-ID and CSeq
 * copied (RFC 3261 §8.2.6.2).
 */
export function responseTo(request: SipRequest, status: number, reason: string, toTag?: string, extra: [string, string][] = [], body?: Buffer): SipResponse {
  const headers: SipHeaders = new Map();
  headers.set('via', [...(request.headers.get('via') ?? [])]);
  headers.set('from', [header(request, 'from')!]);
  let to = header(request, 'to')!;
  if (toTag && status > 100 && !tagOf(to)) to = `${to};tag=${toTag}`;
  headers.set('to', [to]);
  headers.set('call-id', [header(request, 'call-id')!]);
  headers.set('cseq', [header(request, 'cseq')!]);
  // a dialog-making answer carries the proxies' Record-Route back (RFC 3261 §12.1.1)
  const recordRoute = request.headers.get('record-route');
  if (recordRoute && request.method === 'INVITE' && status > 100 && status < 300) headers.set('record-route', [...recordRoute]);
  for (const [name, value] of extra) {
    const have = headers.get(name);
    if (have) have.push(value);
    else headers.set(name, [value]);
  }
  return { kind: 'response', status, reason, headers, body: body ?? Buffer.alloc(0) };
}

export function request(method: string, uri: string, headers: [string, string][], body?: Buffer): SipRequest {
  const map: SipHeaders = new Map();
  for (const [name, value] of headers) {
    const have = map.get(name);
    if (have) have.push(value);
    else map.set(name, [value]);
  }
  return { kind: 'request', method, uri, headers: map, body: body ?? Buffer.alloc(0) };
}

/**
 * Cuts SIP messages out of a TCP stream (RFC 3261 §18.3: Content-Length frames them). Blank
 * lines between messages (keep-alives) are skipped. A head over the limit is an error: the
 * connection is closed.
 */
export class SipStreamFramer {
  private buf: Buffer = Buffer.alloc(0);

  /** The whole messages now in the stream, or an error (the connection should close). */
  push(chunk: Buffer): { messages: Buffer[]; error?: string } {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const messages: Buffer[] = [];
    for (;;) {
      let skip = 0;
      while (skip + 1 < this.buf.length && this.buf[skip] === 13 && this.buf[skip + 1] === 10) skip += 2;
      if (skip) this.buf = this.buf.subarray(skip);
      const end = headEnd(this.buf);
      if (end < 0) {
        if (this.buf.length > MAX_MESSAGE_BYTES) return { messages, error: 'headers over the size limit' };
        return { messages };
      }
      const head = this.buf.toString('latin1', 0, end);
      const cl = /\r\n(?:content-length|l)[ \t]*:[ \t]*(\d+)/i.exec(head);
      if (!cl) return { messages, error: 'a message on a stream without Content-Length' };
      const total = end + 4 + Number(cl[1]);
      if (total > MAX_MESSAGE_BYTES) return { messages, error: 'message over the size limit' };
      if (this.buf.length < total) return { messages };
      messages.push(this.buf.subarray(0, total));
      this.buf = this.buf.subarray(total);
    }
  }
}
