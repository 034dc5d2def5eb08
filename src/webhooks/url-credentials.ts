/**
 * Credentials inside webhook and tool URLs (`https://user:pass@host/x`): kept and used as
 * written, shown masked. The password is replaced by `****` (`https://user:****@host/x`); a URL
 * with a user name alone (often a token) has the user name replaced (`https://****@host/x`).
 * Nothing else of the URL changes, so that a client sending back what it was shown sends the
 * very same string, which `restoreMaskedUrl` turns back into the stored URL.
 */

export const URL_CREDENTIAL_MASK = '****';

function credentials(url: string): { username: string; password: string } | null {
  try {
    const { username, password } = new URL(url);
    return username === '' && password === '' ? null : { username, password };
  } catch {
    return null;
  }
}

/** The URL as shown: its credentials masked; any other string as it is. */
export function maskUrlCredentials(url: string): string {
  const found = credentials(url);
  if (!found) return url;
  // the authority runs to the first / ? # or \; its user info to the last @ inside it
  const m = /^(\s*[A-Za-z][A-Za-z0-9+.-]*:\/\/)([^/?#\\]*)@/.exec(url);
  if (m) {
    const userinfo = m[2]!;
    const colon = userinfo.indexOf(':');
    const user = colon >= 0 ? userinfo.slice(0, colon) : userinfo;
    const password = colon >= 0 ? userinfo.slice(colon + 1) : '';
    const shown = password !== '' ? `${user}:${URL_CREDENTIAL_MASK}` : URL_CREDENTIAL_MASK;
    return `${m[1]}${shown}@${url.slice(m[0].length)}`;
  }
  // an unusual spelling the URL parser still accepts (`https:user:pass@host`): its normal form
  const u = new URL(url);
  if (found.password !== '') u.password = URL_CREDENTIAL_MASK;
  else u.username = URL_CREDENTIAL_MASK;
  return u.href;
}

/** A URL whose credential is the mask itself: one the API showed, not one a person wrote. */
export function isMaskedUrl(url: string): boolean {
  const found = credentials(url);
  if (!found) return false;
  return found.password !== '' ? found.password === URL_CREDENTIAL_MASK : found.username === URL_CREDENTIAL_MASK;
}

/**
 * A URL from a write: a masked one that matches the masked form of one of the stored URLs is that
 * stored URL (the client sent back what it was shown); `null` for a masked URL that matches
 * none (its real credentials are unknown); any other URL as it is.
 */
export function restoreMaskedUrl(url: string, stored: Iterable<string | null | undefined>): string | null {
  if (!isMaskedUrl(url)) return url;
  for (const candidate of stored) {
    if (candidate && maskUrlCredentials(candidate) === url) return candidate;
  }
  return null;
}

export const MASKED_URL_PROBLEM = `has masked credentials (${URL_CREDENTIAL_MASK}) that match no stored URL; send the real user name and password`;
