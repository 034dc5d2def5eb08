/**
 * deploy/kamailio/kamailio.cfg for real: Debian's Kamailio in front of two Switchboard runtimes
 * (each its own SIP endpoint and RTP ports, one database between them), called by a real SIP
 * phone (baresip) at Kamailio's address. New calls go to the two in turn; a runtime that drains
 * (SIGTERM: OPTIONS and new INVITEs answered 503, `/readyz` 503) or stops gets none, and its live
 * call goes on. Skipped (with a warning) where kamailio or baresip is not installed; `.ci/run`
 * installs both and sets REQUIRE_KAMAILIO.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Baresip, baresipAvailable, stopAllBaresip } from '../helpers/baresip.js';
import { eventually, frontDesk, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { createTestDb, defaultDbKind, type TestDb } from '../helpers/db.js';
import { freePort } from '../../src/net.js';

const CONFIG = join(import.meta.dirname, '../../deploy/kamailio/kamailio.cfg');
const kamailioAvailable = spawnSync('kamailio', ['-v'], { stdio: 'ignore' }).status === 0;
const available = kamailioAvailable && baresipAvailable();
if (!available) {
  const missing = [kamailioAvailable ? null : 'kamailio', baresipAvailable() ? null : 'baresip'].filter(Boolean).join(' and ');
  if (process.env.REQUIRE_KAMAILIO) throw new Error(`REQUIRE_KAMAILIO is set but ${missing} is not installed`);
  console.warn(`[kamailio tests skipped] no ${missing}: apt-get install kamailio baresip`);
}

let db: TestDb;
let a: CallingServer;
let b: CallingServer;
let dir: string;
let kamailio: ChildProcess | null = null;
let kamailioPort: number;
let number: string;

beforeAll(async () => {
  if (!available) return;
  db = await createTestDb(defaultDbKind());
  // the two runtimes share the database (each closes without dropping it)
  const shared: TestDb = { ...db, drop: async () => undefined };
  a = await startCallingServer({ RTP_PORT_MIN: '33000', RTP_PORT_MAX: '33100' }, { sip: { port: 0 } }, {}, shared);
  b = await startCallingServer({ RTP_PORT_MIN: '33200', RTP_PORT_MAX: '33300' }, { sip: { port: 0 } }, {}, shared);
  // one organization's number, served by either runtime; the trunk is Kamailio, on 127.0.0.1
  expect((await a.api('PATCH', '/account', { sip: { inbound: { allowed_addresses: ['127.0.0.1'] } } })).status).toBe(200);
  ({ number } = await a.setUpNumber({ provider: 'sip', definition: frontDesk }));
  dir = await mkdtemp(join(tmpdir(), 'sb-kamailio-'));
  const list = join(dir, 'dispatcher.list');
  await writeFile(list, `1 sip:127.0.0.1:${a.runtime.sip!.port}\n1 sip:127.0.0.1:${b.runtime.sip!.port}\n`);
  kamailioPort = await freePort();
  kamailio = spawn(
    'kamailio',
    ['-DD', '-E', '-f', CONFIG, '-m', '32', '-M', '4', '-Y', dir, '-P', join(dir, 'kamailio.pid'),
      '-A', `LISTEN=udp:127.0.0.1:${kamailioPort}`, '-A', `DISPATCHER_LIST="${list}"`, '-A', 'PING_INTERVAL=1'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  kamailio.stderr!.on('data', (chunk: Buffer) => { log += chunk.toString(); if (process.env.KAMAILIO_LOG) process.stderr.write(chunk); });
  // Kamailio is up once it answers OPTIONS itself
  await eventually('Kamailio listening', async () => (await options(kamailioPort)) === 200 || undefined, 10_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${log}`);
  });
}, 60_000);
afterEach(async () => {
  await stopAllBaresip();
});
afterAll(async () => {
  if (!available) return;
  kamailio?.kill('SIGTERM');
  await a?.close();
  await b?.close().catch(() => undefined);
  await db?.drop();
  await rm(dir, { recursive: true, force: true });
});

/** The status of an OPTIONS sent to 127.0.0.1:`port` over UDP (0: no answer in a second). */
async function options(port: number): Promise<number> {
  const dgram = await import('node:dgram');
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const local = socket.address().port;
  const branch = `z9hG4bK${Math.random().toString(36).slice(2)}`;
  const request =
    `OPTIONS sip:127.0.0.1:${port} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:${local};branch=${branch}\r\nMax-Forwards: 70\r\n` +
    `From: <sip:probe@127.0.0.1>;tag=p1\r\nTo: <sip:127.0.0.1:${port}>\r\nCall-ID: ${branch}\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n`;
  try {
    return await new Promise<number>((resolve) => {
      const timer = setTimeout(() => resolve(0), 1_000);
      socket.on('message', (msg) => {
        clearTimeout(timer);
        resolve(Number(/^SIP\/2\.0 (\d{3})/.exec(msg.toString('latin1'))?.[1] ?? 0));
      });
      socket.send(request, port, '127.0.0.1');
    });
  } finally {
    socket.close();
  }
}

/** A call from a new phone to the number at Kamailio's address, established: the runtime that took it. */
async function callThroughKamailio(name: string): Promise<{ phone: Baresip; took: 'a' | 'b' }> {
  const before = { a: a.runtime.sip!.dialogCount, b: b.runtime.sip!.dialogCount };
  const phone = await Baresip.start({ name });
  await phone.dial(`sip:${number}@127.0.0.1:${kamailioPort}`);
  await phone.waitFor('CALL_ESTABLISHED', 15_000);
  const took = await eventually(`${name}'s call on a runtime`, () =>
    a.runtime.sip!.dialogCount > before.a ? 'a' : b.runtime.sip && b.runtime.sip.dialogCount > before.b ? 'b' : undefined,
  );
  return { phone, took };
}

async function hangUp(phone: Baresip): Promise<void> {
  await phone.hangup();
  await phone.waitFor('CALL_CLOSED');
}

describe.skipIf(!available)('Kamailio in front of two Switchboard processes', () => {
  it('takes calls in turn; a draining process answers 503 and gets no new call while its own goes on; a stopped one gets none', async () => {
    // both answer their health checks
    expect(await options(a.runtime.sip!.port)).toBe(200);
    expect(await options(b.runtime.sip!.port)).toBe(200);
    await new Promise((r) => setTimeout(r, 1_500));

    // in turn
    const first = await callThroughKamailio('first');
    await hangUp(first.phone);
    const second = await callThroughKamailio('second');
    await hangUp(second.phone);
    expect(new Set([first.took, second.took])).toEqual(new Set(['a', 'b']));

    // b has a live call and starts draining (what SIGTERM does): no new calls, the live one goes on
    const held = await callThroughKamailio('held');
    const drainer = held.took === 'a' ? a : b;
    const other = held.took === 'a' ? b : a;
    const drained = drainer.runtime.close(60_000);
    await eventually('the draining process refusing its health check', async () => (await options(drainer.runtime.sip!.port)) === 503 || undefined, 5_000);
    expect((await fetch(`${drainer.baseUrl}/readyz`)).status).toBe(503);
    expect((await fetch(`${other.baseUrl}/readyz`)).status).toBe(200);
    for (const name of ['during-drain-1', 'during-drain-2']) {
      const call = await callThroughKamailio(name);
      expect(call.took).toBe(held.took === 'a' ? 'b' : 'a');
      await hangUp(call.phone);
    }
    // the held call was never cut; once it ends, the draining process stops
    expect(drainer.runtime.sip!.dialogCount).toBe(1);
    await hangUp(held.phone);
    await drained;

    // stopped: no answer at all, and the calls still go through the other
    expect(await options(drainer.runtime.sip!.port)).toBe(0);
    const after = await callThroughKamailio('after-stop');
    expect(after.took).toBe(held.took === 'a' ? 'b' : 'a');
    await hangUp(after.phone);
  }, 120_000);
});
