/**
 * The SIP relay of a warm transfer's join (src/telephony/sip/bridge.ts): `npm run bench:relay`.
 *
 * This process holds N relayed pairs of RTP sessions (the caller's leg and the operator's, each
 * with its own port pair, relayed as `bridgeDialogs` does: `relay` → `sendPayload`). A child
 * process plays both phones of every pair: each sends a 20 ms PCMU packet every 20 ms (its send
 * time inside), and reads the packets relayed to it. For each N:
 *
 * - delay through the relay: phone → relay → other phone, p50 / p99 / max (two loopback hops
 *   and the relay's work);
 * - the direct path: the same phones sending to each other with no relay (one hop), p50 / p99;
 * - added delay: the p99 through the relay minus the direct p99 (what the relay adds each way);
 * - the relay's CPU: this process's user+system time over the run, as a share of one core,
 *   per packet relayed (µs: receive, jitter buffer, send), and pairs per core at that rate
 *   (N / share);
 * - lost: packets sent and never relayed.
 *
 *   npm run bench:relay -- [--pairs 50,100,200,400] [--seconds 10]
 */
import { fork, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { RtpPorts, RtpSession } from '../../src/telephony/sip/rtp.js';

const FRAME_MS = 20;

interface Summary {
  sent: number;
  received: number;
  p50: number;
  p99: number;
  max: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summarize(delays: number[], sent: number): Summary {
  const sorted = [...delays].sort((a, b) => a - b);
  return { sent, received: delays.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? NaN };
}

// ---------------------------------------------------------------------------------------------
// the phones (child process)

interface PhonesStart {
  kind: 'start';
  /** Per pair: where each phone sends (the relay's ports, or the other phone's for the direct path). */
  targets: Array<[number, number]>;
  seconds: number;
}

async function phones(): Promise<void> {
  const sockets: dgram.Socket[] = [];
  process.on('message', async (m: { kind: 'bind'; pairs: number } | PhonesStart) => {
    if (m.kind === 'bind') {
      for (let i = 0; i < m.pairs * 2; i++) {
        const s = dgram.createSocket('udp4');
        await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
        sockets.push(s);
      }
      process.send!({ kind: 'ports', ports: sockets.map((s) => (s.address() as { port: number }).port) });
      return;
    }
    const delays: number[] = [];
    let sent = 0;
    for (const s of sockets) {
      s.on('message', (b) => {
        // audio only (the relay's RTCP reports go to the port after ours: maybe another phone's)
        if (b.length !== 172 || (b[1]! & 0x7f) !== 0) return;
        delays.push(performance.timeOrigin + performance.now() - b.readDoubleBE(12));
      });
    }
    const timers: NodeJS.Timeout[] = [];
    const stopAt = performance.now() + m.seconds * 1000;
    m.targets.forEach(([a, b], i) => {
      const phonesOfPair: Array<[dgram.Socket, number]> = [
        [sockets[i * 2]!, a],
        [sockets[i * 2 + 1]!, b],
      ];
      let seq = 0;
      // each pair starts at its own point of the 20 ms, as calls do
      timers.push(
        setTimeout(() => {
          const tick = () => {
            if (performance.now() > stopAt) return;
            for (const [socket, port] of phonesOfPair) {
              // a buffer of its own each time: a sent one is read later, when the socket writes it
              const packet = Buffer.alloc(12 + 160, 0xff);
              packet[0] = 0x80;
              packet[1] = 0; // PCMU
              packet.writeUInt16BE(seq & 0xffff, 2);
              packet.writeUInt32BE((seq * 160) >>> 0, 4);
              packet.writeUInt32BE(i + 1, 8);
              packet.writeDoubleBE(performance.timeOrigin + performance.now(), 12);
              socket.send(packet, port, '127.0.0.1');
              sent++;
            }
            seq++;
          };
          timers.push(setInterval(tick, FRAME_MS));
        }, (i * FRAME_MS) / m.targets.length),
      );
    });
    await new Promise((r) => setTimeout(r, m.seconds * 1000 + 300));
    for (const t of timers) clearInterval(t);
    // the first second warms up: left out
    process.send!({ kind: 'done', summary: summarize(delays.slice(Math.min(delays.length, m.targets.length * 2 * 50)), sent - m.targets.length * 2 * 50) });
  });
}

// ---------------------------------------------------------------------------------------------
// the relay (this process)

function ask<T>(child: ChildProcess, message: object, kind: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: { kind: string }) => {
      if (m.kind !== kind) return;
      child.off('message', on);
      resolve(m as T);
    };
    child.on('message', on);
    child.send(message);
  });
}

async function run(pairs: number, seconds: number, direct: boolean): Promise<{ summary: Summary; cpuShare: number; cpuUs: number }> {
  const child = fork(fileURLToPath(import.meta.url), ['--phones'], { execArgv: ['--import', 'tsx'] });
  const { ports } = await ask<{ ports: number[] }>(child, { kind: 'bind', pairs }, 'ports');
  const sessions: RtpSession[] = [];
  const rtpPorts = new RtpPorts(0, 0);
  const log = pino({ level: 'silent' });
  const targets: Array<[number, number]> = [];
  for (let i = 0; i < pairs; i++) {
    if (direct) {
      targets.push([ports[i * 2 + 1]!, ports[i * 2]!]);
      continue;
    }
    const legs: RtpSession[] = [];
    for (const phonePort of [ports[i * 2]!, ports[i * 2 + 1]!]) {
      const media = await rtpPorts.allocate('127.0.0.1');
      legs.push(
        new RtpSession({ ...media, codec: 'PCMU', payload: 0, dtmfPayload: 101, remote: { address: '127.0.0.1', port: phonePort }, signallingAddress: '127.0.0.1', logger: log, onAudio: () => undefined, onDtmf: () => undefined }),
      );
    }
    const [a, b] = legs as [RtpSession, RtpSession];
    a.relay = (payload, codec) => b.sendPayload(payload, codec);
    b.relay = (payload, codec) => a.sendPayload(payload, codec);
    sessions.push(a, b);
    targets.push([a.port, b.port]);
  }
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const { summary } = await ask<{ summary: Summary }>(child, { kind: 'start', targets, seconds }, 'done');
  const used = process.cpuUsage(cpu);
  const cpuUs = used.user + used.system;
  const cpuShare = cpuUs / 1000 / (performance.now() - t0);
  for (const s of sessions) s.close();
  child.kill();
  return { summary, cpuShare, cpuUs };
}

async function main(): Promise<void> {
  const arg = (name: string, fallback: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? process.argv[i + 1]! : fallback;
  };
  const counts = arg('pairs', '50,100,200,400').split(',').map(Number);
  const seconds = Number(arg('seconds', '10'));
  process.stdout.write(`bench:relay on Node ${process.version}: relayed pairs of PCMU legs, a packet every 20 ms each way, ${seconds} s each\n`);
  process.stdout.write('pairs | through the relay p50 / p99 / max (ms) | direct p50 / p99 (ms) | added p99 (ms) | relay CPU (share of a core) | CPU per packet relayed (µs) | pairs per core | lost\n');
  for (const pairs of counts) {
    const relayed = await run(pairs, seconds, false);
    const direct = await run(pairs, seconds, true);
    const r = relayed.summary;
    const d = direct.summary;
    const f = (x: number | null) => (x === null || Number.isNaN(x) ? "-" : x.toFixed(2));
    process.stdout.write(
      `${pairs} | ${f(r.p50)} / ${f(r.p99)} / ${f(r.max)} | ${f(d.p50)} / ${f(d.p99)} | ${f(r.p99 - d.p99)} | ${(relayed.cpuShare * 100).toFixed(1)}% | ${(relayed.cpuUs / Math.max(1, r.sent)).toFixed(1)} | ${Math.round(pairs / relayed.cpuShare)} | ${Math.max(0, r.sent - r.received)} of ${r.sent}\n`,
    );
  }
}

if (process.argv.includes('--phones')) void phones();
else
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
