/** Local networking helpers shared by the demo, the benchmarks and the tests. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago (for a server that must know it before listening). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}
