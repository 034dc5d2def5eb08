/**
 * The body of a vendor's refused WebSocket upgrade (its HTTP status and error text), read small and
 * never waited on for long: at most 16 KiB kept, one second at most.
 */
import type { IncomingMessage } from 'node:http';

export function readSmallBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      clearTimeout(timer);
      res.destroy();
      resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const timer = setTimeout(done, 1_000);
    res.on('data', (chunk: Buffer) => {
      if (size < 16_384) chunks.push(chunk);
      size += chunk.length;
    });
    res.on('end', done);
    res.on('error', done);
    res.on('close', done);
  });
}
