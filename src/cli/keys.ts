/**
 * API keys: `keys create --org "<name>"` (prints the key alone as the last line), `keys list`,
 * `keys revoke <prefix>`. Honours DATA_DIR and DATABASE_URL like the server.
 */
import { parseArgs } from 'node:util';
import { loadConfig, ConfigError } from '../config.js';
import { openDb } from '../store/db.js';
import { DataDirInUseError } from '../store/lock.js';
import { KeyRepository } from '../store/keys.js';

const USAGE = `Usage:
  npm run --silent keys -- create --org "<organization name>"
  npm run --silent keys -- list
  npm run --silent keys -- revoke <key prefix, e.g. sk_live_AbCd1234>`;

async function run(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { org: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  if (command === 'create' && (!values.org || values.org.trim() === '')) {
    process.stderr.write(`keys create needs --org "<organization name>"\n${USAGE}\n`);
    return 2;
  }
  if (command === 'revoke' && rest.length !== 1) {
    process.stderr.write(`keys revoke needs one key prefix\n${USAGE}\n`);
    return 2;
  }
  if (!['create', 'list', 'revoke'].includes(command)) {
    process.stderr.write(`unknown command "${command}"\n${USAGE}\n`);
    return 2;
  }

  const config = loadConfig();
  const db = await openDb({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  const keys = new KeyRepository(db);
  try {
    if (command === 'create') {
      const created = await keys.createKey(values.org!.trim());
      process.stderr.write(
        `Created an API key for organization "${created.organization.name}" (${created.organization.id}).\n` +
          'It is shown once; only its hash is stored.\n',
      );
      process.stdout.write(`${created.key}\n`);
      return 0;
    }
    if (command === 'list') {
      const all = await keys.listKeys();
      if (all.length === 0) process.stdout.write('no keys\n');
      for (const k of all) {
        const state = k.revoked_at ? `revoked ${k.revoked_at}` : 'active';
        process.stdout.write(`${k.prefix}…  ${state}  created ${k.created_at}  org "${k.organization_name}" (${k.organization_id})\n`);
      }
      return 0;
    }
    const result = await keys.revoke(rest[0]!);
    if (result.ambiguous.length > 0) {
      process.stderr.write(`"${rest[0]}" matches several active keys (${result.ambiguous.join(', ')}); give a longer prefix.\n`);
      return 1;
    }
    if (result.revoked.length === 0) {
      process.stderr.write(`no active key starts with "${rest[0]}"\n`);
      return 1;
    }
    process.stdout.write(`revoked ${result.revoked.join(', ')}\n`);
    return 0;
  } finally {
    await db.close();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof DataDirInUseError || err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
    } else {
      process.stderr.write(`keys: ${err instanceof Error ? err.message : String(err)}\n`);
    }
    process.exit(1);
  },
);
