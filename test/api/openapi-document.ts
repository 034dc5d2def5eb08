/**
 * The OpenAPI document of a server that takes calls (the app with its runtime, so that the call
 * and chat routes are in it), on an in-memory embedded database, built without listening.
 *
 * Run directly (`npm run lint:openapi`), it writes the document to a temp file and lints it with
 * Redocly's recommended rules (docs/openapi.md); `--out FILE` writes it there instead, unlinted.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createRuntime } from '../../src/runtime.js';
import { createStore } from '../../src/store/index.js';
import { openMemoryDb } from '../helpers/db.js';

export async function openApiDocument(env: Record<string, string> = {}): Promise<Record<string, any>> {
  const db = await openMemoryDb();
  const config = loadConfig({ LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '0', ...env });
  const logger = createLogger('silent');
  const store = createStore(db);
  // in-process sessions and queues: the document does not depend on where they live
  const runtime = await createRuntime({ config, store, logger, webhookQueueName: `openapi-${process.pid}-${Date.now()}` });
  const app = await buildApp({ config, store, logger, runtime });
  try {
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}`);
    return res.json();
  } finally {
    await runtime.close(0);
    await app.close();
    await db.close();
  }
}

async function main(argv: string[]): Promise<number> {
  const doc = await openApiDocument();
  const outAt = argv.indexOf('--out');
  if (outAt >= 0) {
    const out = argv[outAt + 1];
    if (!out) throw new Error('--out needs a file name');
    writeFileSync(out, `${JSON.stringify(doc, null, 2)}\n`);
    return 0;
  }
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc, null, 2));
    const redocly = fileURLToPath(new URL('../../node_modules/.bin/redocly', import.meta.url));
    const lint = spawnSync(redocly, ['lint', '--extends', 'recommended', '--format', 'stylish', file], {
      stdio: 'inherit',
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    });
    if (lint.error) throw lint.error;
    return lint.status ?? 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
