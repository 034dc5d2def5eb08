// The API as the dashboard calls it: the key from this tab's sessionStorage in the Authorization
// header of every request (never in a URL), errors with the API's own `error`, `message` and
// `details` (DECISIONS 2), and the paths those details start with.

const KEY_STORE = 'switchboard.console.key';

export const keyStore = {
  get: () => sessionStorage.getItem(KEY_STORE) || '',
  set: (key) => sessionStorage.setItem(KEY_STORE, key),
  forget: () => sessionStorage.removeItem(KEY_STORE),
};

/** A refused request: the status, and the body the API answered with. */
export class ApiError extends Error {
  constructor(method, path, status, body) {
    super(body?.message || body?.error || `${method} ${path}: HTTP ${status}`);
    this.status = status;
    this.error = body?.error || `HTTP ${status}`;
    this.details = Array.isArray(body?.details) ? body.details : [];
    this.path = path;
  }
}

/** Anything that stops a request from being answered at all (no server, no network). */
function unreachable(method, path, err) {
  const e = new ApiError(method, path, 0, { error: 'No answer', message: `The server did not answer (${err.message}).` });
  e.cause = err;
  return e;
}

/** Called when the key is refused (401): the shell goes back to the key form. */
let onUnauthorized = () => {};
export const setUnauthorizedHandler = (fn) => (onUnauthorized = fn);

export async function api(method, path, body, { key = keyStore.get(), raw = false, signal } = {}) {
  let res;
  try {
    res = await fetch(path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal,
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw unreachable(method, path, err);
  }
  if (raw && res.ok) return res;
  const json = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) {
    const err = new ApiError(method, path, res.status, json);
    if (res.status === 401 && key === keyStore.get()) onUnauthorized(err);
    throw err;
  }
  return json;
}

export const get = (path, opts) => api('GET', path, undefined, opts);

/**
 * The path a detail starts with, and the rest: `nodes[2] (booking).llm_config.model: unknown …`
 * → {path: 'nodes[2].llm_config.model', node: 2, text}. A detail without a path has path null.
 */
export function splitDetail(detail) {
  const m = /^((?:[A-Za-z_$][\w$-]*|\[[^\]]*\])(?: \([^)]*\))?(?:(?:\.[A-Za-z_$][\w$-]*|\[[^\]]*\])(?: \([^)]*\))?)*): (.*)$/s.exec(detail);
  if (!m) return { path: null, text: detail };
  const path = m[1].replace(/ \([^)]*\)/g, '');
  return { path, text: m[2] };
}

/** The details of an error that name `path` or a field inside it (`tts_config` takes `tts_config.voice_id`). */
export function detailsFor(error, path) {
  if (!error?.details?.length) return [];
  return error.details.filter((d) => {
    const p = splitDetail(d).path;
    return p !== null && (p === path || p.startsWith(`${path}.`) || p.startsWith(`${path}[`));
  });
}

/** The details no field of `paths` shows: shown together at the top of the form. */
export function unclaimed(error, paths) {
  if (!error?.details?.length) return [];
  return error.details.filter((d) => !paths.some((p) => detailsFor({ details: [d] }, p).length > 0));
}
