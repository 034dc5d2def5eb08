/**
 * `bench:calls --tracing`: an OTLP/HTTP receiver in a process of its own (so that its CPU is not the
 * server's), answering every export 200 and counting the requests and bytes it was sent.
 */
import { spawn } from 'node:child_process';

const SINK = `
const http = require('node:http');
let requests = 0, bytes = 0;
const server = http.createServer((req, res) => {
  req.on('data', (d) => { bytes += d.length; });
  req.on('end', () => { requests++; res.writeHead(200, { 'content-type': 'application/json' }); res.end('{}'); });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\\n'));
process.on('SIGTERM', () => { process.stdout.write(JSON.stringify({ requests, bytes }) + '\\n'); process.exit(0); });
`;

export interface OtlpSink {
  /** The base endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`). */
  url: string;
  /** Stops the receiver: what it was sent. */
  close(): Promise<{ requests: number; bytes: number }>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  const child = spawn(process.execPath, ['-e', SINK], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let waiting: ((line: string) => void) | null = null;
  let buffered = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      if (waiting) {
        const w = waiting;
        waiting = null;
        w(line);
      } else lines.push(line);
    }
  });
  const next = () => new Promise<string>((resolve) => (lines.length > 0 ? resolve(lines.shift()!) : (waiting = resolve)));
  const { port } = JSON.parse(await next()) as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      const counts = next();
      child.kill('SIGTERM');
      return JSON.parse(await counts) as { requests: number; bytes: number };
    },
  };
}
