/** Reads the configuration, opens the store, serves the app, and shuts down gracefully. */
import { loadConfig, ConfigError, type Config } from './config.js';
import { createLogger } from './logger.js';
import { openDb } from './store/db.js';
import { DataDirInUseError } from './store/lock.js';
import { createStore, type Store } from './store/index.js';
import { buildApp } from './app.js';
import { createRuntime } from './runtime.js';
import { collectStartupGarbage } from './heap.js';
import { installLastResort } from './last-resort.js';

const DEV_ORGANIZATION = 'Development';

/** On the embedded default with no key at all, one development key is made and printed once. */
async function ensureDevelopmentKey(config: Config, store: Store): Promise<string | null> {
  if (config.DATABASE_URL || (await store.keys.countKeys()) > 0) return null;
  const { key } = await store.keys.createKey(DEV_ORGANIZATION);
  return key;
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL);
  const db = await openDb({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  const store = createStore(db);
  const devKey = await ensureDevelopmentKey(config, store);
  const runtime = await createRuntime({ config, store, logger, ...(config.SIP_PORT ? { sip: { port: config.SIP_PORT } } : {}) });
  const app = await buildApp({ config, store, logger, runtime });

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      logger.error('grace period over; exiting');
      process.exit(1);
    }, config.SHUTDOWN_GRACE_SECONDS * 1000 + 5000);
    force.unref();
    // no new calls; live ones may finish within the grace period, then end with their reports sent
    await runtime.close(config.SHUTDOWN_GRACE_SECONDS * 1000);
    await app.close();
    await db.close();
    logger.info('stopped');
  };
  // an error that escapes every guard is a defect, but must not take every live call down with it
  installLastResort(logger, runtime.metrics);
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));

  // start-up's garbage goes before the first call can come (src/heap.ts)
  if (!collectStartupGarbage()) logger.warn('could not collect start-up garbage: an idle server keeps it until V8 collects on its own');
  const address = await app.listen({ port: config.PORT, host: config.HOST });
  const storage = config.DATABASE_URL ? 'PostgreSQL (DATABASE_URL)' : `embedded database in ${config.DATA_DIR}`;
  const lines = [
    '',
    `Switchboard is serving on ${address}`,
    `  storage:  ${storage}`,
    `  sessions: ${config.REDIS_URL ? 'Redis (REDIS_URL)' : 'in process'}`,
    `  API docs: ${address}/docs   OpenAPI: ${address}/openapi.json`,
    `  console:  ${address}/console   (chats and web calls in the browser, with your API key)`,
  ];
  if (devKey) {
    lines.push(
      '',
      `  Development API key (shown once, keep it): ${devKey}`,
      `  Try: curl -H "Authorization: Bearer ${devKey}" ${address}/workflows`,
    );
  } else {
    lines.push('  API keys: npm run keys -- create --org "<name>"');
  }
  process.stdout.write(`${lines.join('\n')}\n\n`);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof DataDirInUseError) {
    process.stderr.write(`${err.message}\n`);
  } else {
    process.stderr.write(`Switchboard could not start: ${err instanceof Error ? err.stack : String(err)}\n`);
  }
  process.exit(1);
});
