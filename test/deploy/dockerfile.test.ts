/**
 * The Dockerfile, checked without Docker: a linter (dockerfile-utils, the one VS Code's Docker
 * extension uses) finds no problem, and the image is what an operator needs: production
 * dependencies installed in their own stage by an install that works with any npm, a non-root
 * user, a health check that works, /data as a volume, the HTTP port exposed, SIGTERM to stop.
 */
import { validate as lintDockerfile } from 'dockerfile-utils';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  healthStandIn,
  keyValues,
  options,
  parseDockerfile,
  repoFile,
  runHealthcheck,
  stagesOf,
  type Instruction,
  type StandIn,
} from './deploy-files.js';

const text = repoFile('Dockerfile');
const instructions = parseDockerfile(text);
const stages = stagesOf(instructions);
const runtime = stages.at(-1)!;
const inRuntime = (keyword: string): Instruction[] => runtime.instructions.filter((i) => i.keyword === keyword);
const lastInRuntime = (keyword: string): Instruction => {
  const found = inRuntime(keyword).at(-1);
  if (!found) throw new Error(`the runtime stage has no ${keyword}`);
  return found;
};
const runtimeEnv = Object.assign({}, ...inRuntime('ENV').map((i) => keyValues(i.args))) as Record<string, string>;
const packageJson = JSON.parse(repoFile('package.json')) as {
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  engines?: { node?: string };
};

describe('Dockerfile', () => {
  it('has no problem a Dockerfile linter finds', () => {
    const problems = lintDockerfile(text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
    expect(problems).toEqual([]);
  });

  it('the linter does find problems (so that its silence means something)', () => {
    expect(lintDockerfile('FROM node\nHEALTHCHECK --interva=5s CMD true\nEXPOSE http\n')).toHaveLength(2);
  });

  it('builds in stages: dependencies, then a runtime that copies them', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage.name, `FROM ${stage.image} has no stage name`).toBeTruthy();
    const copiedModules = inRuntime('COPY').find((i) => /\bnode_modules\b/.test(i.args));
    const from = copiedModules && options(copiedModules.args).options.from;
    expect(from, 'the runtime stage does not take node_modules from another stage').toBeTruthy();
    expect(stages.map((s) => s.name)).toContain(from);
  });

  it('both stages are the same Node.js, one the app supports', () => {
    const images = new Set(stages.map((s) => s.image));
    expect(images.size, 'native modules built in one image may not load in another').toBe(1);
    const nodeVersion = instructions.find((i) => i.keyword === 'ARG' && i.args.startsWith('NODE_VERSION='));
    const image = [...images][0]!.replace('${NODE_VERSION}', nodeVersion ? nodeVersion.args.split('=')[1]! : '');
    const major = Number(/^node:(\d+)/.exec(image)?.[1]);
    const minimum = Number(/(\d+)/.exec(packageJson.engines?.node ?? '0')?.[1]);
    expect(major).toBeGreaterThanOrEqual(minimum);
  });

  it('installs with `npm install` against the lock, never `npm ci`; the runtime gets production dependencies only', () => {
    const runs = instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    for (const run of runs) {
      // npm 11's `npm ci` refuses a lock without other platforms' optional packages
      expect(run).not.toMatch(/\bnpm\s+(ci|clean-install|ic|install-clean|isntall-clean)\b/);
    }
    const depsStage = stages.find((s) => s.name === options(inRuntime('COPY').find((i) => /node_modules/.test(i.args))!.args).options.from)!;
    const copiedFirst = depsStage.instructions.find((i) => i.keyword === 'COPY')!;
    expect(copiedFirst.args.split(/\s+/)).toEqual(expect.arrayContaining(['package.json', 'package-lock.json']));
    const installs = depsStage.instructions.filter((i) => i.keyword === 'RUN' && /\bnpm\s+(install|i)\b/.test(i.args));
    expect(installs).toHaveLength(1);
    expect(installs[0]!.args).toMatch(/--omit=dev\b/);
    // `prepare` runs scripts/build.mjs in that install: it must be there (and builds nothing without TypeScript)
    expect(depsStage.instructions.some((i) => i.keyword === 'COPY' && /^scripts\s/.test(i.args))).toBe(true);
    expect(packageJson.scripts.prepare).toBe('node scripts/build.mjs');
    // the image runs compiled JavaScript: no TypeScript loader at run time
    expect(packageJson.dependencies).not.toHaveProperty('tsx');
  });

  it('compiles in a build stage, and the runtime takes dist/ from it', () => {
    const copiedDist = inRuntime('COPY').find((i) => /\bdist\b/.test(i.args));
    const from = copiedDist && options(copiedDist.args).options.from;
    expect(from, 'the runtime stage does not take dist/ from another stage').toBeTruthy();
    const buildStage = stages.find((s) => s.name === from)!;
    expect(buildStage.instructions.some((i) => i.keyword === 'RUN' && /node scripts\/build\.mjs/.test(i.args))).toBe(true);
    for (const source of ['engine', 'src', 'scripts']) {
      expect(buildStage.instructions.some((i) => i.keyword === 'COPY' && options(i.args).rest.split(/\s+/)[0] === source), `${source}/ is not copied to build`).toBe(true);
    }
  });

  it('copies no whole build context, and keeps local state and secrets out of it', () => {
    for (const copy of instructions.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD')) {
      expect(copy.args, `line ${copy.line} copies everything`).not.toMatch(/(^|\s)\.\s+\S+$/);
    }
    const ignored = repoFile('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'data', '.git', '.env', 'coverage']));
    const copiedFromContext = instructions
      .filter((i) => i.keyword === 'COPY' && !options(i.args).options.from)
      .flatMap((i) => options(i.args).rest.split(/\s+/).slice(0, -1));
    for (const source of copiedFromContext) expect(ignored, `${source} is copied but ignored`).not.toContain(source);
  });

  it('runs what `npm start` runs, as a user other than root', () => {
    expect(JSON.parse(lastInRuntime('CMD').args)).toEqual(packageJson.scripts.start!.split(/\s+/));
    const users = runtime.instructions.filter((i) => i.keyword === 'USER');
    const user = users.at(-1)?.args.split(':')[0];
    expect(user, 'the runtime stage runs as root').toBeDefined();
    expect(['root', '0']).not.toContain(user);
    expect(users.at(-1)!.line).toBeLessThan(lastInRuntime('CMD').line);
  });

  it('keeps the embedded database in the /data volume, writable by that user', () => {
    expect(runtimeEnv.DATA_DIR).toBe('/data');
    const volumes = inRuntime('VOLUME').flatMap((i) => (i.args.startsWith('[') ? (JSON.parse(i.args) as string[]) : i.args.split(/\s+/)));
    expect(volumes).toContain('/data');
    const user = lastInRuntime('USER').args.split(':')[0]!;
    expect(inRuntime('RUN').some((i) => new RegExp(`chown\\s+(-R\\s+)?${user}(:\\S+)?\\s+/data`).test(i.args))).toBe(true);
  });

  it('listens on all interfaces, on the port it exposes', () => {
    expect(runtimeEnv.HOST).toBe('0.0.0.0');
    const exposed = inRuntime('EXPOSE').flatMap((i) => i.args.split(/\s+/).map((p) => p.split('/')[0]));
    expect(exposed).toContain(runtimeEnv.PORT);
  });

  it('stops on SIGTERM, which the app handles by ending calls gracefully', () => {
    expect(lastInRuntime('STOPSIGNAL').args).toBe('SIGTERM');
    expect(repoFile('src/main.ts')).toMatch(/process\.once\('SIGTERM'/);
  });
});

describe('the image HEALTHCHECK, run as the container would', () => {
  const healthcheck = options(lastInRuntime('HEALTHCHECK').args);
  const command = JSON.parse(healthcheck.rest.replace(/^CMD\s+/, '')) as string[];
  let standIn: StandIn;
  beforeAll(async () => {
    standIn = await healthStandIn();
  });
  afterAll(() => standIn.close());

  it('is an exec-form node command on /healthz, with a start period for the first start', () => {
    expect(healthcheck.rest).toMatch(/^CMD \[/);
    expect(command[0]).toBe('node');
    expect(command.join(' ')).toContain('/healthz');
    expect(healthcheck.options).toHaveProperty('start-period');
    expect(healthcheck.options).toHaveProperty('interval');
  });

  it('passes while the app answers /healthz, fails when nothing listens', async () => {
    expect(await runHealthcheck(command, standIn.port)).toBe(0);
    const closed = await healthStandIn();
    await closed.close();
    expect(await runHealthcheck(command, closed.port)).toBe(1);
  });
});
