/**
 * The dashboard (DECISIONS 14, 19; docs/dashboard.md): `GET /console`, a page that calls the API
 * itself with the key the user gives it, so nothing here needs one.
 *
 * The page (`src/console/index.html`) loads one script and one stylesheet, the dashboard's bundle
 * (`src/console/bundle.ts`): built into dist/ beside the page by `npm run build`, or bundled in
 * memory at the first request when the server runs from its sources (the tests). Scripts and
 * styles go compressed (brotli or gzip, as the browser accepts) and are revalidated (`no-cache`
 * with an ETag), so that an upgrade is seen at once.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { BUNDLE_FILES, bundleDashboard, type BundleFile } from '../console/bundle.js';

const PAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'console');

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
};

/** A Host header fit to name in a policy: a name or address, and a port. */
const HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The page may load only its own files and talk only to its own origin: the API, and the web
 * call's socket (ws/wss of the same host, which 'self' does not cover in every browser). A
 * recording plays from a blob the page fetched with its key.
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

type Encoding = 'br' | 'gzip' | 'identity';

interface StaticFile {
  type: string;
  /** The bytes in each encoding, made when first asked for. */
  bodies: Partial<Record<Encoding, { body: Buffer; etag: string }>>;
  raw: Buffer;
  compressible: boolean;
}

const etagOf = (body: Buffer, encoding: Encoding) =>
  `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}${encoding === 'identity' ? '' : `-${encoding}`}"`;

function staticFile(raw: Buffer, name: string): StaticFile {
  const ext = name.slice(name.lastIndexOf('.') + 1);
  return { type: TYPES[ext] ?? 'application/octet-stream', raw, bodies: {}, compressible: ext === 'js' || ext === 'css' };
}

function encoded(file: StaticFile, encoding: Encoding): { body: Buffer; etag: string } {
  const made = file.bodies[encoding];
  if (made) return made;
  const body =
    encoding === 'br'
      ? brotliCompressSync(file.raw, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: file.raw.length } })
      : encoding === 'gzip'
        ? gzipSync(file.raw, { level: 9 })
        : file.raw;
  return (file.bodies[encoding] = { body, etag: etagOf(body, encoding) });
}

/** What the client accepts of what we make: brotli, else gzip, else the bytes as they are. */
function encodingFor(request: FastifyRequest, file: StaticFile): Encoding {
  if (!file.compressible) return 'identity';
  const accepted = String(request.headers['accept-encoding'] ?? '')
    .split(',')
    .map((part) => part.trim().split(';'))
    .filter(([, q]) => !q || !/^q=0(?:\.0*)?$/.test(q.trim()))
    .map(([name]) => name!.toLowerCase());
  if (accepted.includes('br')) return 'br';
  if (accepted.includes('gzip')) return 'gzip';
  return 'identity';
}

/** The bundle: as built into dist/, or made from the sources once per process. */
let bundle: Promise<Map<BundleFile, StaticFile>> | null = null;
function dashboardFiles(): Promise<Map<BundleFile, StaticFile>> {
  bundle ??= (async () => {
    const built = existsSync(join(PAGE_DIR, 'dashboard.js'));
    const files = built
      ? new Map(BUNDLE_FILES.filter((n) => existsSync(join(PAGE_DIR, n))).map((n) => [n, readFileSync(join(PAGE_DIR, n))] as const))
      : await bundleDashboard();
    return new Map([...files].map(([name, bytes]) => [name, staticFile(bytes, name)] as const));
  })();
  bundle.catch(() => {
    bundle = null; // a later request tries again
  });
  return bundle;
}

/** `GET /console` and its files; registered by `buildApp` outside the API's key check. */
export const consoleRoutes: FastifyPluginAsync = async (app) => {
  const own = new Map<string, StaticFile>([
    ['/console', staticFile(readFileSync(join(PAGE_DIR, 'index.html')), 'index.html')],
    ['/console/mic-worklet.js', staticFile(readFileSync(join(PAGE_DIR, 'mic-worklet.js')), 'mic-worklet.js')],
  ]);

  const send = (file: StaticFile, request: FastifyRequest, reply: FastifyReply) => {
    const encoding = encodingFor(request, file);
    const { body, etag } = encoded(file, encoding);
    reply
      .header('content-type', file.type)
      .header('cache-control', 'no-cache')
      .header('etag', etag)
      .header('x-content-type-options', 'nosniff');
    if (file.compressible) reply.header('vary', 'accept-encoding');
    if (encoding !== 'identity') reply.header('content-encoding', encoding);
    if (file.type.startsWith('text/html')) {
      reply.header('content-security-policy', pagePolicy(request.headers.host)).header('referrer-policy', 'no-referrer');
    }
    if (request.headers['if-none-match'] === etag) return reply.code(304).send();
    return reply.send(body);
  };

  app.get('/console', { schema: { hide: true } }, async (request, reply) => send(own.get('/console')!, request, reply));
  app.get('/console/*', { schema: { hide: true } }, async (request, reply) => {
    const path = request.url.split('?')[0]!.replace(/\/+$/, '');
    if (path === '/console') return send(own.get('/console')!, request, reply);
    const file = own.get(path);
    if (file) return send(file, request, reply);
    const name = path.slice('/console/'.length) as BundleFile;
    if (!BUNDLE_FILES.includes(name)) return reply.code(404).send({ error: 'Not found', message: `The console has no file ${path}.` });
    let files: Map<BundleFile, StaticFile>;
    try {
      files = await dashboardFiles();
    } catch (err) {
      request.log.error({ err }, 'the dashboard could not be bundled');
      return reply
        .code(503)
        .send({ error: 'Unavailable', message: 'The dashboard is not built: run `npm run build` (it bundles src/dashboard/ into dist/).' });
    }
    const bundled = files.get(name);
    if (!bundled) return reply.code(404).send({ error: 'Not found', message: `The console has no file ${path}.` });
    return send(bundled, request, reply);
  });
};
