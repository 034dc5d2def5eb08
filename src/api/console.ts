/**
 * The console (DECISIONS 14, docs/console.md): `GET /console`, a page that lists assistants and
 * workflows, draws a workflow with dagre and runs a chat or a web call against it. Static files
 * only: the page calls the API itself with the key the user gives it, so nothing here needs one.
 *
 * The page is plain browser JavaScript in `src/console/` (no build step); dagre's browser build
 * is served from `node_modules` under a versioned name (`/console/vendor/dagre-<version>.min.js`),
 * cached for good. The page's own files are revalidated (`no-cache` with an ETag) so that an
 * upgrade is seen at once.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';

const require = createRequire(import.meta.url);
const PAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'console');
const DAGRE_DIR = dirname(require.resolve('@dagrejs/dagre/package.json'));
const DAGRE_VERSION = (require('@dagrejs/dagre/package.json') as { version: string }).version;

/** Where the page loads dagre from (index.html names the same path). */
export const DAGRE_PATH = `/console/vendor/dagre-${DAGRE_VERSION}.min.js`;

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  map: 'application/json; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
};

/** A Host header fit to name in a policy: a name or address, and a port. */
const HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The page may load only its own files and talk only to its own origin: the API, and the web
 * call's socket (ws/wss of the same host, which 'self' does not cover in every browser).
 */
export function pagePolicy(host: string | undefined): string {
  const sockets = host && HOST.test(host) ? ` ws://${host} wss://${host}` : '';
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src 'self'${sockets}`,
    "media-src 'self' blob:",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

interface StaticFile {
  body: Buffer;
  type: string;
  etag: string;
  cache: string;
}

/** A file as served; its type comes from the name it is served under (`servedAs`), the source's by default. */
function load(path: string, cache: string, transform?: (text: string) => string, servedAs = path): StaticFile {
  let body = readFileSync(path);
  if (transform) body = Buffer.from(transform(body.toString('utf8')));
  const ext = servedAs.slice(servedAs.lastIndexOf('.') + 1);
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  return { body, type: TYPES[ext] ?? 'application/octet-stream', etag, cache };
}

function files(): Map<string, StaticFile> {
  const revalidate = 'no-cache';
  const forever = 'public, max-age=31536000, immutable';
  const own = (name: string, transform?: (text: string) => string) => load(join(PAGE_DIR, name), revalidate, transform);
  return new Map([
    ['/console', own('index.html', (html) => html.replaceAll('{{DAGRE_PATH}}', DAGRE_PATH))],
    ['/console/app.js', own('app.js')],
    ['/console/app.css', own('app.css')],
    ['/console/mic-worklet.js', own('mic-worklet.js')],
    [DAGRE_PATH, load(join(DAGRE_DIR, 'dist', 'dagre.min.js'), forever)],
    // the script's own comment names its map `dagre.min.js.map`, beside it
    ['/console/vendor/dagre.min.js.map', load(join(DAGRE_DIR, 'dist', 'dagre.min.js.map'), forever)],
    [`/console/vendor/dagre-${DAGRE_VERSION}.LICENSE.txt`, load(join(DAGRE_DIR, 'LICENSE'), forever, undefined, 'LICENSE.txt')],
  ]);
}

/** `GET /console` and its files; registered by `buildApp` outside the API's key check. */
export const consoleRoutes: FastifyPluginAsync = async (app) => {
  const served = files();

  const send = (file: StaticFile, request: FastifyRequest, reply: FastifyReply) => {
    reply
      .header('content-type', file.type)
      .header('cache-control', file.cache)
      .header('etag', file.etag)
      .header('x-content-type-options', 'nosniff');
    if (file.type.startsWith('text/html')) {
      reply.header('content-security-policy', pagePolicy(request.headers.host)).header('referrer-policy', 'no-referrer');
    }
    if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
    return reply.send(file.body);
  };

  app.get('/console', { schema: { hide: true } }, async (request, reply) => send(served.get('/console')!, request, reply));
  app.get('/console/*', { schema: { hide: true } }, async (request, reply) => {
    const path = request.url.split('?')[0]!.replace(/\/+$/, '');
    const file = served.get(path);
    if (!file) return reply.code(404).send({ error: 'Not found', message: `The console has no file ${path}.` });
    return send(file, request, reply);
  });
};
