/** `build()`: the real app on a real database (PGlite, or PostgreSQL when DATABASE_URL is set). */
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createStore, type Store } from '../../src/store/index.js';
import { createTestDb, defaultDbKind, type DbKind, type TestDb } from './db.js';

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  testDb: TestDb;
  key: string;
  orgId: string;
  /** Another organization's key, for isolation checks. */
  otherKey: string;
  request(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT',
    url: string,
    body?: unknown,
    key?: string | null,
  ): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export async function build(
  options: { kind?: DbKind; env?: Record<string, string> } = {},
): Promise<TestApp> {
  const testDb = await createTestDb(options.kind ?? defaultDbKind());
  const store = createStore(testDb.db);
  const config: Config = loadConfig({ LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE: 'true', ...options.env });
  const app = await buildApp({ config, store, logger: createLogger(config.LOG_LEVEL) });
  await app.ready();
  const mine = await store.keys.createKey('Acme Test');
  const other = await store.keys.createKey('Other Org');
  return {
    app,
    store,
    testDb,
    key: mine.key,
    orgId: mine.organization.id,
    otherKey: other.key,
    request(method, url, body, key) {
      const headers: Record<string, string> = {};
      const k = key === undefined ? mine.key : key;
      if (k !== null) headers.authorization = `Bearer ${k}`;
      return app.inject({
        method,
        url,
        headers,
        ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
      });
    },
    async close() {
      await app.close();
      await testDb.drop();
    },
  };
}

/** A small sound definition for API tests. */
export function sampleDefinition(nodes = 3) {
  const ids = Array.from({ length: nodes }, (_, i) => (i === nodes - 1 ? 'goodbye' : `step_${i}`));
  return {
    version: 1,
    entry_node: ids[0],
    global_prompt: 'You are a helpful receptionist.',
    nodes: ids.map((id, i) =>
      i === nodes - 1
        ? { id, type: 'end', first_line: 'Goodbye!' }
        : { id, type: 'conversation', first_line: `Step ${i}.`, instructions: `Handle step ${i}.` },
    ),
    edges: ids.slice(1).map((to, i) => ({ from: ids[i], to, description: `when step ${i} is done` })),
  };
}

export const pipelineAssistant = {
  name: 'Receptionist',
  llm_config: { provider: 'sandbox' },
  stt_config: { provider: 'sandbox' },
  tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
};
