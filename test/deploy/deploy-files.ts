/**
 * Reading the deployment files as Docker and Compose would, without Docker: the Dockerfile's
 * instructions and stages, Compose's `${VAR:-default}` interpolation and durations, and a
 * container HEALTHCHECK command run here against a stand-in server.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export const repoFile = (file: string): string =>
  readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

// --- Dockerfile ---------------------------------------------------------------------------------

export interface Instruction {
  keyword: string;
  args: string;
  /** 1-based line where the instruction starts */
  line: number;
}

export interface Stage {
  /** the FROM instruction's image, as written (ARGs not expanded) */
  image: string;
  name: string | null;
  instructions: Instruction[];
}

/** Instructions in order; continuation lines joined, comments (and parser directives) dropped. */
export function parseDockerfile(text: string): Instruction[] {
  const instructions: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, index) => {
    const line = raw.replace(/\r$/, '').trim();
    if (line.startsWith('#') || (pending === '' && line === '')) return;
    if (pending === '') start = index + 1;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      return;
    }
    pending += line;
    const match = /^(\S+)\s*([\s\S]*)$/.exec(pending.trim());
    if (match) instructions.push({ keyword: match[1]!.toUpperCase(), args: match[2]!.trim(), line: start });
    pending = '';
  });
  if (pending !== '') throw new Error(`Dockerfile line ${start}: a continuation (\\) runs off the end of the file`);
  return instructions;
}

/** The build stages, each with the instructions after its FROM; ARGs before the first FROM are dropped. */
export function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const words = instruction.args.split(/\s+/).filter((w) => !w.startsWith('--'));
      const asIndex = words.findIndex((w) => w.toUpperCase() === 'AS');
      stages.push({
        image: words[0] ?? '',
        name: asIndex >= 0 ? (words[asIndex + 1] ?? null) : null,
        instructions: [],
      });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

/** `KEY=value` pairs of ENV (or LABEL) arguments; quotes removed. */
export function keyValues(args: string): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const match of args.matchAll(/([A-Za-z_][\w.-]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
    const value = match[2]!;
    pairs[match[1]!] = value.startsWith('"') ? (JSON.parse(value) as string) : value;
  }
  return pairs;
}

/** `--name=value` options at the start of an instruction's arguments, and what follows them. */
export function options(args: string): { options: Record<string, string>; rest: string } {
  const found: Record<string, string> = {};
  let rest = args;
  for (let match = /^--([\w-]+)=(\S+)\s*/.exec(rest); match; match = /^--([\w-]+)=(\S+)\s*/.exec(rest)) {
    found[match[1]!] = match[2]!;
    rest = rest.slice(match[0].length);
  }
  return { options: found, rest };
}

// --- Compose ------------------------------------------------------------------------------------

/**
 * Compose's interpolation of one string: `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
 * `${VAR:?message}`, `${VAR?message}`, `${VAR:+alt}`, `${VAR+alt}`, and `$$` for a literal `$`.
 */
export function interpolate(value: string, env: Record<string, string | undefined>): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_]\w*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_]\w*)/g,
    (whole, braced: string | undefined, operator: string | undefined, operand: string | undefined, bare: string | undefined) => {
      if (whole === '$$') return '$';
      const name = (braced ?? bare)!;
      const current = env[name];
      const set = current !== undefined;
      const setAndNonEmpty = set && current !== '';
      switch (operator) {
        case undefined:
          return current ?? '';
        case ':-':
          return setAndNonEmpty ? current : operand!;
        case '-':
          return set ? current : operand!;
        case ':?':
        case '?':
          if (operator === ':?' ? setAndNonEmpty : set) return current!;
          throw new Error(`${name}: ${operand || 'must be set'}`);
        case ':+':
          return setAndNonEmpty ? operand! : '';
        case '+':
          return set ? operand! : '';
        default:
          throw new Error(`unknown interpolation operator ${operator} in ${whole}`);
      }
    },
  );
}

/** Every string value of a parsed Compose document interpolated (keys are left as they are). */
export function interpolateAll(node: unknown, env: Record<string, string | undefined>): unknown {
  if (typeof node === 'string') return interpolate(node, env);
  if (Array.isArray(node)) return node.map((item) => interpolateAll(item, env));
  if (node !== null && typeof node === 'object') {
    return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, interpolateAll(value, env)]));
  }
  return node;
}

const DURATION_UNITS_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go duration as Compose reads it (`45s`, `1m30s`, `500ms`), in milliseconds. */
export function durationMs(value: string): number {
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(value)) {
    throw new Error(`${JSON.stringify(value)} is not a duration such as 45s or 1m30s`);
  }
  let total = 0;
  for (const match of value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) {
    total += Number(match[1]) * DURATION_UNITS_MS[match[2]!]!;
  }
  return total;
}

// --- health checks ------------------------------------------------------------------------------

export interface StandIn {
  port: number;
  /** what /readyz answers; /healthz always answers 200 */
  readyStatus: number;
  close(): Promise<void>;
}

/** An HTTP server answering /healthz and /readyz as Switchboard does, on a free loopback port. */
export async function healthStandIn(): Promise<StandIn> {
  const state = { readyStatus: 200 };
  const server: Server = createServer((request, response) => {
    const status = request.url === '/healthz' ? 200 : request.url === '/readyz' ? state.readyStatus : 404;
    response.writeHead(status, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get readyStatus() {
      return state.readyStatus;
    },
    set readyStatus(status: number) {
      state.readyStatus = status;
    },
    close: () => new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))),
  };
}

/**
 * Runs a health check's exec form (`["node", "-e", …]`, as Docker would run it in the container)
 * with this Node and `PORT` set; resolves to its exit code.
 */
export function runHealthcheck(command: string[], port: number): Promise<number> {
  const [program, ...args] = command;
  if (program !== 'node') throw new Error(`the health check runs ${program}, not node: cannot run it here`);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { env: { ...process.env, PORT: String(port) }, timeout: 15_000 },
      (err) => resolve(err ? (typeof err.code === 'number' ? err.code : -1) : 0),
    );
  });
}
