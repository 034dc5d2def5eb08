/**
 * An OTLP/HTTP trace receiver on 127.0.0.1, as a collector listens (`POST /v1/traces`, JSON or
 * protobuf): it keeps each export's body and content type, answers 200, and reads JSON exports
 * back as spans.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  url: string;
  exports: Array<{ path: string; contentType: string; body: Buffer }>;
  /** The spans of every JSON export so far. */
  spans(): ReceivedSpan[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean };
const value = (v: AnyValue) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue ?? v.boolValue);

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const exports: OtlpReceiver['exports'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      exports.push({ path: req.url ?? '', contentType: String(req.headers['content-type'] ?? ''), body: Buffer.concat(chunks) });
      const json = String(req.headers['content-type']).includes('json');
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(json ? '{}' : undefined);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    spans() {
      const out: ReceivedSpan[] = [];
      for (const e of exports.filter((x) => x.contentType.includes('json'))) {
        const doc = JSON.parse(e.body.toString()) as {
          resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ name: string; traceId: string; spanId: string; parentSpanId?: string; attributes?: Array<{ key: string; value: AnyValue }> }> }> }>;
        };
        for (const rs of doc.resourceSpans ?? []) {
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              out.push({
                name: s.name,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, value(a.value)])),
              });
            }
          }
        }
      }
      return out;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
