/**
 * docker-compose.yml, checked without Docker: valid against the Compose Specification's JSON schema
 * (compose-spec.json, vendored here, see compose-spec.SOURCE.md) after Compose's interpolation,
 * and the invariants an operator relies on: stop_grace_period above the app's grace period,
 * health checks that work and that start-up waits for, named volumes for what must survive.
 */
import { existsSync } from 'node:fs';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config.js';
import {
  durationMs,
  healthStandIn,
  interpolateAll,
  parseDockerfile,
  repoFile,
  runHealthcheck,
  stagesOf,
  type StandIn,
} from './deploy-files.js';

interface Healthcheck {
  test?: string | string[];
  disable?: boolean;
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}
interface Service {
  image?: string;
  build?: unknown;
  environment?: Record<string, string> | string[];
  volumes?: (string | { type?: string; source?: string; target: string })[];
  ports?: (string | { target: number; published?: string | number })[];
  healthcheck?: Healthcheck;
  depends_on?: string[] | Record<string, { condition: string }>;
  restart?: string;
  stop_grace_period?: string;
  command?: string | string[];
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

/** An operator who set nothing, and one who set what the file asks for. */
const NOTHING_SET = {};
const OPERATOR_SET = {
  PUBLIC_URL: 'https://voice.example.com',
  DEEPGRAM_API_KEY: 'dg-key',
  OPENAI_API_KEY: 'sk-key',
  ELEVENLABS_API_KEY: 'el-key',
  CARTESIA_API_KEY: 'sk_car-key',
  ANTHROPIC_API_KEY: 'sk-ant-key',
  GOOGLE_API_KEY: 'AIza-key',
  SMTP_URL: 'smtps://calls:secret@smtp.example.com:465',
  SMTP_FROM: 'Acme calls <calls@example.com>',
  RECORDINGS_S3_URL: 's3://AKIAEXAMPLE:secret@acme-recordings/switchboard?region=eu-west-1',
  SIP_PUBLIC_ADDRESS: '198.51.100.7',
  POSTGRES_PASSWORD: 'a-long-random-password',
};

const raw = parse(repoFile('docker-compose.yml')) as unknown;
const compose = interpolateAll(raw, NOTHING_SET) as ComposeFile;
const service = (name: string): Service => {
  const found = compose.services[name];
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
};
const environmentOf = (s: Service): Record<string, string> =>
  Array.isArray(s.environment)
    ? Object.fromEntries(s.environment.map((pair) => [pair.split('=')[0]!, pair.split('=').slice(1).join('=')]))
    : Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v)]));
const mounts = (s: Service) =>
  (s.volumes ?? []).map((v) => {
    if (typeof v !== 'string') return { source: v.source ?? null, target: v.target };
    const [source, target] = v.split(':');
    return target === undefined ? { source: null, target: source! } : { source: source!, target };
  });

const schemaErrors = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? []).map((e) => `${e.instancePath || '/'}: ${e.message ?? ''} ${JSON.stringify(e.params)}`);

describe('docker-compose.yml against the Compose Specification schema', () => {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  const validate = ajv.compile(JSON.parse(repoFile('test/deploy/compose-spec.json')) as object);

  it.each([
    ['with nothing set', NOTHING_SET],
    ['with what an operator sets', OPERATOR_SET],
  ])('is valid after interpolation %s', (_, env) => {
    const ok = validate(interpolateAll(raw, env));
    expect(schemaErrors(validate.errors)).toEqual([]);
    expect(ok).toBe(true);
  });

  it('the validator does refuse what Compose refuses', () => {
    expect(validate({ services: { app: { image: 'x', stop_grace_period: 45 } } })).toBe(false);
    expect(validate({ services: { app: { image: 'x', depends_on: { db: { condition: 'healthy' } } } } })).toBe(false);
    expect(validate({ services: { app: { image: 'x', healtcheck: {} } } })).toBe(false);
  });
});

describe('the switchboard service', () => {
  const switchboard = service('switchboard');
  const env = environmentOf(switchboard);
  const config = loadConfig(env);

  it('has an environment the app accepts, with no variable it does not read', () => {
    const withOperatorValues = loadConfig(environmentOf((interpolateAll(raw, OPERATOR_SET) as ComposeFile).services.switchboard!));
    for (const name of Object.keys(env)) expect(withOperatorValues, `${name} is not a Switchboard setting`).toHaveProperty(name);
    expect(Object.keys(env)).toEqual(expect.arrayContaining(['PUBLIC_URL', 'DEEPGRAM_API_KEY', 'OPENAI_API_KEY', 'ELEVENLABS_API_KEY']));
  });

  it('gets longer to stop than the app takes to end live calls and exit', () => {
    // main.ts lets live calls run SHUTDOWN_GRACE_SECONDS after SIGTERM, then exits by force this much later
    const force = /SHUTDOWN_GRACE_SECONDS \* 1000 \+ ([\d_]+)/.exec(repoFile('src/main.ts'));
    expect(force, 'the force-exit margin after the grace period is no longer found in src/main.ts').not.toBeNull();
    const forceExitMs = config.SHUTDOWN_GRACE_SECONDS * 1000 + Number(force![1]!.replaceAll('_', ''));
    expect(switchboard.stop_grace_period, 'without stop_grace_period Docker kills live calls after 10 s').toBeDefined();
    expect(durationMs(switchboard.stop_grace_period!)).toBeGreaterThan(forceExitMs);
  });

  it('uses the PostgreSQL and Redis services, with the credentials PostgreSQL is given', () => {
    const db = new URL(config.DATABASE_URL!);
    const postgres = environmentOf(service('postgres'));
    expect(db.hostname).toBe('postgres');
    expect(decodeURIComponent(db.username)).toBe(postgres.POSTGRES_USER);
    expect(decodeURIComponent(db.password)).toBe(postgres.POSTGRES_PASSWORD);
    expect(db.pathname).toBe(`/${postgres.POSTGRES_DB}`);
    expect(new URL(config.REDIS_URL!).hostname).toBe('redis');
  });

  it('publishes the port the app listens on, on all interfaces of the container', () => {
    expect(config.HOST).toBe('0.0.0.0');
    const containerPorts = (switchboard.ports ?? []).map((p) => (typeof p === 'string' ? Number(p.split(':').at(-1)) : p.target));
    expect(containerPorts).toContain(config.PORT);
  });

  it('keeps DATA_DIR on a named volume: call recordings are kept there unless RECORDINGS_S3_URL is set', () => {
    // the image sets DATA_DIR=/data (Dockerfile)
    expect(repoFile('Dockerfile')).toMatch(/DATA_DIR=\/data\b/);
    const dataVolume = mounts(switchboard).find((m) => m.target === '/data');
    expect(dataVolume?.source, 'recordings (and an embedded database) need a named volume at DATA_DIR').toBeTruthy();
    expect(compose.volumes).toHaveProperty(dataVolume!.source!);
  });

  it('is built from the Dockerfile, and the README\'s keys command runs in it', () => {
    expect(switchboard.build).toBeDefined();
    const stages = stagesOf(parseDockerfile(repoFile('Dockerfile')));
    const copied = stages.at(-1)!.instructions.filter((i) => i.keyword === 'COPY' && !i.args.includes('--from'));
    const commands = [repoFile('README.md'), repoFile('docker-compose.yml')].flatMap((text) => [
      ...text.matchAll(/docker compose run --rm (\S+) ([^`\n]+)/g),
    ]);
    expect(commands.length).toBeGreaterThan(0);
    for (const [, name, command] of commands) {
      expect(compose.services, `${name} is not a service`).toHaveProperty(name!);
      const script = command!.split(/\s+/).find((word) => word.endsWith('.ts') || word.endsWith('.js'));
      // a compiled script (dist/…/x.js) exists once its source (…/x.ts) does: the build stage makes it
      const source = script?.replace(/^dist\//, '').replace(/\.js$/, '.ts');
      expect(source && existsSync(new URL(`../../${source}`, import.meta.url)), `${command} runs no file that exists`).toBe(true);
      const folder = script!.split('/')[0]!;
      const all = stages.at(-1)!.instructions.filter((i) => i.keyword === 'COPY');
      expect([...copied, ...all].some((c) => c.args.split(/\s+/).includes(folder) || c.args.split(/\s+/).includes(`/app/${folder}`)), `the image does not copy ${folder}/`).toBe(true);
    }
  });
});

describe('start-up order and health', () => {
  it('every service has a health check and a restart policy', () => {
    for (const [name, s] of Object.entries(compose.services)) {
      const check = s.healthcheck;
      expect(check?.test, `${name} has no health check`).toBeDefined();
      expect(check!.disable ?? false).toBe(false);
      expect([check!.test].flat()[0], `${name}'s health check is turned off`).not.toBe('NONE');
      expect(durationMs(check!.timeout!), `${name}: the timeout is longer than the interval`).toBeLessThanOrEqual(durationMs(check!.interval!));
      expect(['always', 'unless-stopped', 'on-failure'], `${name} is not restarted`).toContain(s.restart?.split(':')[0]);
    }
  });

  it('every dependency is waited for until healthy', () => {
    const dependencies = Object.entries(compose.services).flatMap(([name, s]) =>
      Array.isArray(s.depends_on)
        ? s.depends_on.map((d) => [name, d, 'service_started'] as const)
        : Object.entries(s.depends_on ?? {}).map(([d, how]) => [name, d, how.condition] as const),
    );
    expect(dependencies.map(([name, d]) => `${name}→${d}`)).toEqual(
      expect.arrayContaining(['switchboard→postgres', 'switchboard→redis']),
    );
    for (const [name, dependency, condition] of dependencies) {
      expect(condition, `${name} does not wait for ${dependency} to be healthy`).toBe('service_healthy');
      expect(service(dependency).healthcheck?.test).toBeDefined();
    }
  });

  describe("switchboard's health check, run as the container would", () => {
    const test = [service('switchboard').healthcheck!.test!].flat();
    let standIn: StandIn;
    beforeAll(async () => {
      standIn = await healthStandIn();
    });
    afterAll(() => standIn.close());

    it('runs node (the image has no curl) on the app\'s own /readyz or /healthz', () => {
      expect(test[0]).toBe('CMD');
      expect(test.join(' ')).toMatch(/\/(readyz|healthz)/);
    });

    it('passes while the app is ready, fails while it is not or is not listening', async () => {
      standIn.readyStatus = 200;
      expect(await runHealthcheck(test.slice(1), standIn.port)).toBe(0);
      standIn.readyStatus = 503;
      expect(await runHealthcheck(test.slice(1), standIn.port)).toBe(1);
      const closed = await healthStandIn();
      await closed.close();
      expect(await runHealthcheck(test.slice(1), closed.port)).toBe(1);
    });
  });
});

describe('volumes', () => {
  const named = (name: string, target: string) => {
    const mount = mounts(service(name)).find((m) => m.target === target);
    expect(mount?.source, `${name} keeps ${target} in no volume`).toBeTruthy();
    expect(mount!.source!.startsWith('.') || mount!.source!.startsWith('/'), `${name}: ${target} is a bind mount`).toBe(false);
    expect(compose.volumes, `volume ${mount!.source} is not declared`).toHaveProperty(mount!.source!);
  };

  it("PostgreSQL's data is in a named volume at the image's data directory", () => {
    // postgres:18 and later keep their data one level up (/var/lib/postgresql)
    const major = Number(/^postgres:(\d+)/.exec(service('postgres').image ?? '')?.[1]);
    expect(major, 'postgres is not pinned to a major version').toBeGreaterThan(0);
    named('postgres', major >= 18 ? '/var/lib/postgresql' : '/var/lib/postgresql/data');
  });

  it("Redis's data (call sessions, the durable queues) is in a named volume, appended to on every write", () => {
    named('redis', '/data');
    expect([service('redis').command].flat().join(' ')).toMatch(/--appendonly yes/);
  });
});
