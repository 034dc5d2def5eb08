/** Reads the configuration, opens the store, serves the app, and shuts down gracefully. */
import { loadConfig, ConfigError, type Config } from './config.js';
import { ErrorCodes, SwitchboardError } from '../engine/errors.js';
import { createLogger } from './logger.js';
import { openDb } from './store/db.js';
import { DataDirInUseError } from './store/lock.js';
import { createStore, type Store } from './store/index.js';
import { buildApp } from './app.js';
import { createRuntime } from './runtime.js';
import { collectStartupGarbage } from './heap.js';
import { installLastResort } from './last-resort.js';
import { startTracing, stopTracing } from './observability/tracing.js';

const DEV_ORGANIZATION = 'Development';

/** The development key this start made, printed by the failure message if the start fails after making it. */
let madeKey: string | null = null;

/** On the embedded default with no key at all, one development key is made and printed once. */
async function ensureDevelopmentKey(config: Config, store: Store): Promise<string | null> {
  if (config.DATABASE_URL || (await store.keys.countKeys()) > 0) return null;
  const { key } = await store.keys.createKey(DEV_ORGANIZATION);
  return key;
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL);
  // OpenTelemetry, when OTEL_EXPORTER_OTLP_ENDPOINT asks for it (docs/observability.md)
  if (await startTracing()) logger.info({ endpoint: process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT }, 'tracing: spans exported over OTLP');
  const db = await openDb({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  const store = createStore(db);
  const devKey = await ensureDevelopmentKey(config, store);
  madeKey = devKey;
  // SIP on its default port gives way to a softphone or a PBX holding it; a SIP_PORT set on purpose does not
  const sipByDefault = process.env.SIP_PORT === undefined;
  const sipWanted = config.SIP_PORT !== 0;
  const runtime = await createRuntime({
    config,
    store,
    logger,
    ...(sipWanted ? { sip: { port: config.SIP_PORT, offWhenInUse: sipByDefault } } : {}),
  });
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
    // what the exporter still holds goes out (bounded by the SDK's own timeout)
    await stopTracing().catch((err: unknown) => logger.warn({ err }, 'tracing: the last spans could not be exported'));
    logger.info('stopped');
  };
  // an error that escapes every guard is a defect, but must not take every live call down with it
  installLastResort(logger, runtime.metrics);
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));

  // start-up's garbage goes before the first call can come (src/heap.ts)
  if (!collectStartupGarbage()) logger.warn('could not collect start-up garbage: an idle server keeps it until V8 collects on its own');
  let address: string;
  try {
    address = await app.listen({ port: config.PORT, host: config.HOST });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    throw new StartError(`PORT ${config.PORT} is in use on ${config.HOST}: stop what holds it, or set PORT to a free port (PORT=3001 npm start)`);
  }
  madeKey = null;
  const storage = config.DATABASE_URL ? 'PostgreSQL (DATABASE_URL)' : `embedded database in ${config.DATA_DIR}`;
  const lines = [
    '',
    `Switchboard is serving on ${address}`,
    `  storage:  ${storage}`,
    `  sessions: ${config.REDIS_URL ? 'Redis (REDIS_URL)' : 'in process'}`,
    `  API docs: ${address}/docs   OpenAPI: ${address}/openapi.json`,
    `  dashboard: ${address}/console   (calls, workflows, assistants, numbers and keys, with your API key)`,
  ];
  if (runtime.sip) lines.push(`  SIP:      port ${runtime.sip.port} (UDP and TCP)`);
  else if (sipWanted) lines.push(`  SIP:      off: port ${config.SIP_PORT} is in use by another program; set SIP_PORT to a free port to take SIP calls`);
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

/** A start refused for a reason a person can act on: said in one line, without a stack. */
/** The server could not start for a reason the operator can fix (a port in use): said plainly, without a stack. */
class StartError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.CONFIG_INVALID] as const;
  override name = 'StartError';
  constructor(message: string) {
    super(ErrorCodes.CONFIG_INVALID, message);
  }
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof DataDirInUseError) {
    process.stderr.write(`${err.message}\n`);
  } else if (err instanceof StartError || /is in use \(UDP or TCP\)/.test(String((err as Error)?.message))) {
    process.stderr.write(`Switchboard could not start: ${(err as Error).message}\n`);
  } else {
    process.stderr.write(`Switchboard could not start: ${err instanceof Error ? err.stack : String(err)}\n`);
  }
  // the key made by this start is in no other place: the next start makes none while one exists
  if (madeKey) {
    process.stderr.write(
      `\n  Development API key made by this start (shown once, keep it; the next start will not show it): ${madeKey}\n` +
        '  Fix the above and start again; this key will work.\n\n',
    );
  }
  process.exit(1);
});
