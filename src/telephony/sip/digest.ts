/**
 * Digest authentication (RFC 3261 §22, RFC 2617 with MD5 and qop=auth), both ways: challenging
 * and checking a trunk's INVITEs, and answering our outbound proxy's challenges. Nonces are
 * stateless (a timestamp signed with a per-process key) and live 5 minutes.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const NONCE_TTL_MS = 5 * 60_000;
const KEY = randomBytes(32);

/** Longer `Authorization` values are refused unread: a real one is a few hundred bytes. */
const MAX_DIGEST_LENGTH = 2048;

/** `Digest a="b", c=d` → its parameters (names lower-cased), or null for another scheme or a malformed one. */
export function parseDigest(value: string): Map<string, string> | null {
  if (value.length > MAX_DIGEST_LENGTH) return null;
  const m = /^\s*Digest\s+/i.exec(value);
  if (!m) return null;
  const params = new Map<string, string>();
  // one pass, each parameter where the last ended (sticky): linear in the header's length
  const re = /\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]+))\s*(?:,|$)/y;
  re.lastIndex = m[0].length;
  while (re.lastIndex < value.length) {
    const r = re.exec(value);
    if (!r) return null;
    params.set(r[1]!.toLowerCase(), r[2] ?? r[3] ?? '');
  }
  return params;
}

/** Equal strings in constant time, whatever bytes they hold. */
function same(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

export function newNonce(now = Date.now()): string {
  const ts = now.toString(16);
  return `${ts}.${createHmac('sha256', KEY).update(ts).digest('base64url').slice(0, 22)}`;
}

function nonceValid(nonce: string, now = Date.now()): boolean {
  const [ts, sig] = nonce.split('.');
  if (!ts || !sig || !/^[0-9a-f]{1,12}$/.test(ts)) return false;
  const expected = createHmac('sha256', KEY).update(ts).digest('base64url').slice(0, 22);
  if (!same(expected, sig)) return false;
  const age = now - parseInt(ts, 16);
  return age >= 0 && age <= NONCE_TTL_MS;
}

/** The `WWW-Authenticate` value of a 401. */
export function challenge(realm: string, stale = false): string {
  return `Digest realm="${realm}", nonce="${newNonce()}", algorithm=MD5, qop="auth"${stale ? ', stale=true' : ''}`;
}

export type DigestCheck = 'ok' | 'missing' | 'stale' | 'wrong';

/**
 * Checks an `Authorization` header against the trunk's username and password, for a request to
 * `requestUri` (the answer must be for that URI: one captured for another request does not pass).
 */
export function verifyDigest(
  authorization: string | undefined,
  method: string,
  creds: { username: string; password: string },
  realm: string,
  requestUri?: string,
): DigestCheck {
  if (!authorization) return 'missing';
  const p = parseDigest(authorization);
  if (!p) return 'wrong';
  if (requestUri !== undefined && p.get('uri') !== requestUri) return 'wrong';
  const nonce = p.get('nonce') ?? '';
  if ((p.get('algorithm') ?? 'MD5').toUpperCase() !== 'MD5') return 'wrong';
  if (p.get('username') !== creds.username || p.get('realm') !== realm) return 'wrong';
  const uri = p.get('uri') ?? '';
  const ha1 = md5(`${creds.username}:${realm}:${creds.password}`);
  const ha2 = md5(`${method}:${uri}`);
  const qop = p.get('qop');
  const expected = qop === 'auth' ? md5(`${ha1}:${nonce}:${p.get('nc') ?? ''}:${p.get('cnonce') ?? ''}:auth:${ha2}`) : md5(`${ha1}:${nonce}:${ha2}`);
  if (!same(p.get('response') ?? '', expected)) return 'wrong';
  return nonceValid(nonce) ? 'ok' : 'stale';
}

/** Our `Authorization` (or `Proxy-Authorization`) answering a proxy's challenge. */
export function answerChallenge(challengeValue: string, method: string, uri: string, creds: { username: string; password: string }, nc = 1): string | null {
  const p = parseDigest(challengeValue);
  if (!p) return null;
  const algorithm = (p.get('algorithm') ?? 'MD5').toUpperCase();
  if (algorithm !== 'MD5') return null;
  const realm = p.get('realm') ?? '';
  const nonce = p.get('nonce') ?? '';
  const ha1 = md5(`${creds.username}:${realm}:${creds.password}`);
  const ha2 = md5(`${method}:${uri}`);
  const qops = (p.get('qop') ?? '').split(',').map((s) => s.trim());
  const parts = [`username="${creds.username}"`, `realm="${realm}"`, `nonce="${nonce}"`, `uri="${uri}"`, 'algorithm=MD5'];
  if (qops.includes('auth')) {
    const cnonce = randomBytes(8).toString('hex');
    const ncs = nc.toString(16).padStart(8, '0');
    parts.push(`response="${md5(`${ha1}:${nonce}:${ncs}:${cnonce}:auth:${ha2}`)}"`, 'qop=auth', `nc=${ncs}`, `cnonce="${cnonce}"`);
  } else {
    parts.push(`response="${md5(`${ha1}:${nonce}:${ha2}`)}"`);
  }
  const opaque = p.get('opaque');
  if (opaque !== undefined) parts.push(`opaque="${opaque}"`);
  return `Digest ${parts.join(', ')}`;
}
