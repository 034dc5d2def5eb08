/**
 * `GET /calls/{id}/recording` in an authenticated scope as the app registers it, with real API
 * keys (on a real database) and recordings in a real temp folder; and its part of the OpenAPI
 * document.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callRecordingRoutes } from '../../src/api/call-recording.js';
import { registerAuth } from '../../src/api/auth.js';
import { registerErrorHandler, RequestValidationError } from '../../src/api/errors.js';
import { openApiTransform, openApiTransformObject } from '../../src/api/openapi.js';
import { LocalRecordingStore, recordingKey, recordingPath, type RecordingStore } from '../../src/recordings/storage.js';
import { createStore, type Store } from '../../src/store/index.js';
import { createTestDb, defaultDbKind, type TestDb } from '../helpers/db.js';

/** A stereo 16-bit PCM WAV at 8 kHz of `frames` frames: left a ramp, right silence. */
function stereoWav(frames: number): Buffer {
  const data = Buffer.alloc(frames * 4);
  for (let i = 0; i < frames; i++) data.writeInt16LE((i * 97) % 32_768, i * 4);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(2, 22); // stereo
  header.writeUInt32LE(8_000, 24);
  header.writeUInt32LE(8_000 * 4, 28);
  header.writeUInt16LE(4, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** The route in an authenticated scope, with the app's validation, errors and OpenAPI transforms. */
async function buildRouteApp(store: Store, recordings: RecordingStore, known: Map<string, string>) {
  const app = Fastify().withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler<z.ZodType>(({ schema, httpPart }) => (data) => {
    const result = schema.safeParse(data);
    return result.success ? { value: result.data } : { error: new RequestValidationError(httpPart ?? 'body', result.error.issues) };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  registerErrorHandler(app);
  await app.register(fastifySwagger, {
    openapi: { openapi: '3.0.3', info: { title: 'test', version: '0' } },
    transform: openApiTransform,
    transformObject: openApiTransformObject,
  });
  await app.register(async (api) => {
    registerAuth(api, store.keys);
    await api.register(callRecordingRoutes(recordings, { callExists: async (org, id) => known.get(id) === org }));
  });
  await app.ready();
  return app;
}

describe('GET /calls/{id}/recording', () => {
  let testDb: TestDb;
  let dir: string;
  let app: FastifyInstance;
  let key: string;
  let otherKey: string;
  const recorded = randomUUID();
  const unrecorded = randomUUID();
  const otherRecorded = randomUUID();
  const wav = stereoWav(8_000 * 3); // 3 s

  beforeAll(async () => {
    testDb = await createTestDb(defaultDbKind());
    dir = await mkdtemp(join(tmpdir(), 'sb-recording-route-'));
    const store = createStore(testDb.db);
    const mine = await store.keys.createKey('Recording Org');
    const other = await store.keys.createKey('Other Org');
    key = mine.key;
    otherKey = other.key;
    const recordings = new LocalRecordingStore(join(dir, 'recordings'));
    for (const [org, call] of [
      [mine.organization.id, recorded],
      [other.organization.id, otherRecorded],
    ] as const) {
      const upload = await recordings.begin(recordingKey(org, call));
      await writeFile(upload.path, wav);
      await upload.commit();
    }
    app = await buildRouteApp(
      store,
      recordings,
      new Map([
        [recorded, mine.organization.id],
        [unrecorded, mine.organization.id],
        [otherRecorded, other.organization.id],
      ]),
    );
  });
  afterAll(async () => {
    await app.close();
    await testDb.drop();
    await rm(dir, { recursive: true, force: true });
  });

  const get = (id: string, k: string | null = key, method: 'GET' | 'HEAD' = 'GET') =>
    app.inject({ method, url: recordingPath(id), headers: k ? { authorization: `Bearer ${k}` } : {} });

  it('streams the WAV as an attachment named after the call', async () => {
    const res = await get(recorded);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('audio/wav');
    expect(res.headers['content-length']).toBe(String(wav.length));
    expect(res.headers['content-disposition']).toBe(`attachment; filename="${recorded}.wav"`);
    expect(res.rawPayload.equals(wav)).toBe(true);
  });

  it('HEAD answers the same headers without reading the recording', async () => {
    const res = await get(recorded, key, 'HEAD');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('audio/wav');
    expect(res.headers['content-length']).toBe(String(wav.length));
    expect(res.rawPayload).toHaveLength(0);
  });

  it('a call without a recording is 404, saying why there may be none', async () => {
    const res = await get(unrecorded);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({
      error: 'Not found',
      message: `The call "${unrecorded}" has no recording: it was not recorded, it is still in progress, or its recording was deleted after RECORDING_RETENTION_DAYS.`,
    });
  });

  it("another organization's call is 404 like an unknown one, recorded or not; no key is 401", async () => {
    for (const [id, k] of [
      [otherRecorded, key],
      [recorded, otherKey],
      [randomUUID(), key],
    ] as const) {
      const res = await get(id, k);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'Not found', message: `No call with id "${id}".` });
    }
    expect((await get(otherRecorded, otherKey)).rawPayload.equals(wav)).toBe(true);
    expect((await get('not-a-uuid')).statusCode).toBe(404);
    expect((await get(recorded, null)).statusCode).toBe(401);
  });

  it('is documented as an audio/wav binary download', async () => {
    const doc = app.swagger() as unknown as { paths: Record<string, Record<string, Record<string, any>>> };
    const path = doc.paths['/calls/{id}/recording']!;
    // the declared HEAD stays out of the document, like every other route's
    expect(Object.keys(path)).toEqual(['get']);
    const operation = path.get!;
    expect(operation.operationId).toBe('getCallRecording');
    expect(operation.tags).toEqual(['calls']);
    expect(operation.description).toContain('left the customer, right what the customer heard of the assistant');
    expect(operation.responses['200'].content).toEqual({ 'audio/wav': { schema: { type: 'string', format: 'binary' } } });
    expect(Object.keys(operation.responses)).toEqual(['200', '400', '401', '404', '429', '503']);
  });
});
