/**
 * Where recordings are kept: files in a real temp folder, and objects in a real S3-compatible
 * server (s3rver on 127.0.0.1, its own temp folder) through the AWS SDK, as a deployment with
 * RECORDINGS_S3_URL uses it.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Writable, type Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RecordingPruner } from '../../src/recordings/retention.js';
import { wavHeader } from '../../src/audio/wav.js';
import { DAY_MS } from '../../src/store/retention.js';
import {
  parseRecordingsS3Url,
  recordingKey,
  recordingStoreFromConfig,
  S3RecordingStore,
  type RecordingStore,
} from '../../src/recordings/storage.js';

const BUCKET = 'recordings';

/**
 * s3rver in a process of its own, started with `--openssl-legacy-provider`: its ListObjectsV2
 * continuation tokens are DES-encrypted, which OpenSSL 3 (Node >= 17) refuses without it (every
 * truncated listing fails with InternalError). It prints its port, then one line per request.
 * It exits when its stdin closes, so that it never outlives the test process.
 */
const S3RVER_MAIN = `
const S3rver = require('s3rver');
const [directory, bucket] = process.argv.slice(1);
const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
server.run().then(({ port }) => {
  server.httpServer.on('request', (req) => process.stdout.write(JSON.stringify({ method: req.method, url: req.url }) + '\\n'));
  process.stdout.write(JSON.stringify({ port }) + '\\n');
});
process.stdin.on('end', () => process.exit(0)).resume();
`;

interface S3Server {
  endpoint: string;
  /** `METHOD /bucket/key?query` of every request so far. */
  requests: string[];
  stop(): Promise<void>;
}

/** A real S3-compatible server on a free port of 127.0.0.1, keeping its objects in `directory`. */
async function startS3(directory: string): Promise<S3Server> {
  const child = spawn(process.execPath, ['--openssl-legacy-provider', '-e', S3RVER_MAIN, directory, BUCKET], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const requests: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`s3rver exited (${code}) before listening`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const message = JSON.parse(line) as { port?: number; method?: string; url?: string };
      if (message.port !== undefined) resolve(message.port);
      else requests.push(`${message.method} ${message.url}`);
    });
  });
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    async stop() {
      child.stdin!.end();
      await exited;
    },
  };
}

/** s3rver's one account is S3RVER / S3RVER. */
const s3Url = (endpoint: string, prefix = 'calls/v1') => `s3://S3RVER:S3RVER@${BUCKET}/${prefix}?endpoint=${endpoint}`;

/** A client of the test's own, to look at the bucket from outside the store. */
const testClient = (endpoint: string) =>
  new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const gone = (path: string) => stat(path).then(() => false, (err: NodeJS.ErrnoException) => err.code === 'ENOENT');

/** A WAV-like file of `bytes` bytes (a header, then noise). */
const wavBytes = (bytes = 4_000) => Buffer.concat([Buffer.from('RIFF....WAVEfmt '), randomBytes(bytes - 16)]);

async function record(store: RecordingStore, key: string, bytes: Buffer): Promise<string> {
  const upload = await store.begin(key);
  await writeFile(upload.path, bytes);
  await upload.commit();
  return upload.path;
}

let root: string;
let s3: S3Server;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'sb-recordings-'));
  s3 = await startS3(join(root, 's3rver'));
});
afterAll(async () => {
  await s3.stop();
  await rm(root, { recursive: true, force: true });
});

const kinds = [
  { kind: 'local', make: (dataDir: string) => recordingStoreFromConfig({ DATA_DIR: dataDir }) },
  { kind: 's3', make: (dataDir: string) => recordingStoreFromConfig({ DATA_DIR: dataDir, RECORDINGS_S3_URL: s3Url(s3.endpoint, `calls/${randomUUID()}`) }) },
] as const;

describe.each(kinds)('the $kind store', ({ kind, make }) => {
  let store: RecordingStore;
  let dataDir: string;
  const key = () => recordingKey(`org_${randomUUID().slice(0, 8)}`, randomUUID());

  beforeAll(async () => {
    dataDir = await mkdtemp(join(root, `data-${kind}-`));
    store = make(dataDir);
  });
  afterAll(async () => {
    await store.close();
  });

  it('is the kind the configuration asks for', () => {
    expect(store.kind).toBe(kind);
  });

  it('keeps what was written to the upload file, and gives the same bytes and size back', async () => {
    const k = key();
    const bytes = wavBytes();
    const upload = await store.begin(k);
    // the folder is there: the recorder only opens the file
    await writeFile(upload.path, bytes);
    expect(upload.path.startsWith(join(dataDir, kind === 'local' ? 'recordings' : 'recordings-upload'))).toBe(true);
    // not a recording until committed
    expect(await store.exists(k)).toBe(false);
    expect(await store.open(k)).toBeNull();
    await upload.commit();
    expect(await store.exists(k)).toBe(true);
    const stored = await store.open(k);
    expect(stored!.size).toBe(bytes.length);
    expect((await readAll(stored!.stream)).equals(bytes)).toBe(true);
    // the in-progress file is gone: renamed into place, or uploaded and deleted
    expect(await gone(upload.path)).toBe(true);
    if (kind === 'local') expect(await readdir(join(dataDir, 'recordings', k.split('/')[0]!))).toEqual([k.split('/')[1]]);
  });

  it('salvages the recording of a call whose process died: the sizes written from what is there, a torn frame cut', async () => {
    const k = key();
    const upload = await store.begin(k);
    // what a recorder leaves when killed mid-call: its header with no sizes, 1,000 whole stereo frames and half of one
    const header = wavHeader({ sampleRate: 8000, channels: 2, dataBytes: 0 });
    const audio = randomBytes(4 * 1000 + 2);
    await writeFile(upload.path, Buffer.concat([header, audio]));
    expect(await store.salvage(k)).toBe(true);
    const stored = await store.open(k);
    const bytes = await readAll(stored!.stream);
    expect(bytes.length).toBe(44 + 4000);
    expect(bytes.subarray(0, 44).equals(wavHeader({ sampleRate: 8000, channels: 2, dataBytes: 4000 }))).toBe(true);
    expect(bytes.subarray(44).equals(audio.subarray(0, 4000))).toBe(true);
    expect(await gone(upload.path)).toBe(true);
    // nothing left to salvage, and a key with no file has none
    expect(await store.salvage(k)).toBe(false);
    expect(await store.salvage(key())).toBe(false);
  });

  it('does not salvage a file that is not a recording (nothing is kept, the file is left as it was)', async () => {
    const k = key();
    const upload = await store.begin(k);
    await writeFile(upload.path, Buffer.from('not a wav file, but longer than a header of forty-four bytes'));
    expect(await store.salvage(k)).toBe(false);
    expect(await store.exists(k)).toBe(false);
    expect((await stat(upload.path)).size).toBe(60);
    await upload.discard();
  });

  it('a discarded upload leaves nothing, and a commit after it is refused', async () => {
    const k = key();
    const upload = await store.begin(k);
    await writeFile(upload.path, wavBytes());
    await upload.discard();
    expect(await gone(upload.path)).toBe(true);
    expect(await store.exists(k)).toBe(false);
    expect(await store.open(k)).toBeNull();
    await expect(upload.commit()).rejects.toThrow(`the recording ${k} was already discarded`);
    // discarding twice, or an upload never written to, is fine
    await upload.discard();
    await (await store.begin(key())).discard();
  });

  it('a commit is done once; a discard after it keeps the recording', async () => {
    const k = key();
    const upload = await store.begin(k);
    await writeFile(upload.path, wavBytes(100));
    await upload.commit();
    await expect(upload.commit()).rejects.toThrow(`the recording ${k} was already committed`);
    await upload.discard();
    expect(await store.exists(k)).toBe(true);
  });

  it('a commit of an upload whose file was never written rejects with a clear error', async () => {
    const k = key();
    const upload = await store.begin(k);
    await expect(upload.commit()).rejects.toThrow(/could not (keep|upload) the recording .*: its file .* is missing \(never written, or already discarded\)/);
    expect(await store.exists(k)).toBe(false);
  });

  it('an unknown key has no recording', async () => {
    const k = key();
    expect(await store.open(k)).toBeNull();
    expect(await store.exists(k)).toBe(false);
  });

  it('a second recording of a key replaces the first', async () => {
    const k = key();
    await record(store, k, wavBytes(200));
    const second = wavBytes(300);
    await record(store, k, second);
    expect((await readAll((await store.open(k))!.stream)).equals(second)).toBe(true);
  });

  it('refuses keys that are not recording keys (a way out of the folder)', async () => {
    for (const bad of ['../x.wav', 'org/../../x.wav', 'org/call.wav.part', 'org/call', '/etc/passwd']) {
      await expect(store.begin(bad)).rejects.toThrow('not a recording key');
      await expect(store.open(bad)).rejects.toThrow('not a recording key');
      await expect(store.exists(bad)).rejects.toThrow('not a recording key');
    }
  });

  it('prune removes the in-progress files a crash left once they are a day old, and no recording for them', async () => {
    const stale = await store.begin(key());
    await writeFile(stale.path, wavBytes(100));
    const old = new Date(Date.now() - 2 * DAY_MS);
    await utimes(stale.path, old, old);
    const live = await store.begin(key());
    await writeFile(live.path, wavBytes(100));
    expect(await store.prune(new Date(0))).toBe(0);
    expect(await gone(stale.path)).toBe(true);
    expect(await gone(live.path)).toBe(false);
    await live.discard();
  });
});

describe('local prune', () => {
  it('deletes the recordings last modified before the cutoff, and nothing else in the folder', async () => {
    const dataDir = await mkdtemp(join(root, 'prune-local-'));
    const store = recordingStoreFromConfig({ DATA_DIR: dataDir });
    const oldKey = recordingKey('org_a', 'old-call');
    const newKey = recordingKey('org_a', 'new-call');
    const otherOrgOld = recordingKey('org_b', 'old-call');
    const oldPath = await record(store, oldKey, wavBytes(100)).then(() => join(dataDir, 'recordings', oldKey));
    await record(store, newKey, wavBytes(100));
    await record(store, otherOrgOld, wavBytes(100));
    const fortyDaysAgo = new Date(Date.now() - 40 * DAY_MS);
    await utimes(oldPath, fortyDaysAgo, fortyDaysAgo);
    await utimes(join(dataDir, 'recordings', otherOrgOld), fortyDaysAgo, fortyDaysAgo);
    // someone else's file in the folder is not a recording
    const foreign = join(dataDir, 'recordings', 'notes.txt');
    await writeFile(foreign, 'keep me');
    await utimes(foreign, fortyDaysAgo, fortyDaysAgo);

    expect(await store.prune(new Date(Date.now() - 30 * DAY_MS))).toBe(2);
    expect(await store.exists(oldKey)).toBe(false);
    expect(await store.exists(otherOrgOld)).toBe(false);
    expect(await store.exists(newKey)).toBe(true);
    expect(await gone(foreign)).toBe(false);
    expect(await store.prune(new Date(Date.now() - 30 * DAY_MS))).toBe(0);
  });

  it('stops when told to, and a store whose folder does not exist yet prunes nothing', async () => {
    const dataDir = await mkdtemp(join(root, 'prune-stop-'));
    const store = recordingStoreFromConfig({ DATA_DIR: dataDir });
    expect(await store.prune(new Date())).toBe(0);
    for (let i = 0; i < 3; i++) await record(store, recordingKey('org_a', `c${i}`), wavBytes(100));
    expect(await store.prune(new Date(Date.now() + DAY_MS), { shouldStop: () => true })).toBe(1);
    expect(await store.prune(new Date(Date.now() + DAY_MS))).toBe(2);
  });
});

describe('S3 store', () => {
  it('prune deletes, page by page, the recordings under its prefix modified before the cutoff, and nothing else', async () => {
    const dataDir = await mkdtemp(join(root, 'prune-s3-'));
    const prefix = `pruned/${randomUUID()}`;
    // two keys a page: five recordings take three pages
    const store = new S3RecordingStore(parseRecordingsS3Url(s3Url(s3.endpoint, prefix)), join(dataDir, 'recordings-upload'), { listPageSize: 2 });
    const keys = Array.from({ length: 5 }, (_, i) => recordingKey(`org_${i % 2}`, `call-${i}`));
    for (const k of keys) await record(store, k, wavBytes(100));
    // what is not a recording of this store: another prefix, another file under the prefix
    const client = testClient(s3.endpoint);
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `elsewhere/${keys[0]}`, Body: 'x' }));
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${prefix}/notes.txt`, Body: 'x' }));

    // LastModified is when the object was uploaded: a cutoff in the past spares all of them
    expect(await store.prune(new Date(Date.now() - DAY_MS))).toBe(0);
    for (const k of keys) expect(await store.exists(k)).toBe(true);
    // a cutoff in the future deletes them all; told to stop, after the first page (notes.txt
    // and org_0/call-0.wav: S3 lists in key order)
    expect(await store.prune(new Date(Date.now() + DAY_MS), { shouldStop: () => true })).toBe(1);
    expect(await store.exists(keys[0]!)).toBe(false);
    expect(await store.prune(new Date(Date.now() + DAY_MS))).toBe(4);
    for (const k of keys) expect(await store.exists(k)).toBe(false);
    await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `elsewhere/${keys[0]}` }));
    await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `${prefix}/notes.txt` }));
    client.destroy();
    await store.close();
  });

  it('uploads a 20 MB recording in parts, streamed from the file, and reads it back equal', async () => {
    const dataDir = await mkdtemp(join(root, 'big-'));
    const prefix = `big/${randomUUID()}`;
    const store = recordingStoreFromConfig({ DATA_DIR: dataDir, RECORDINGS_S3_URL: s3Url(s3.endpoint, prefix) });
    const k = recordingKey('org_big', randomUUID());
    const upload = await store.begin(k);
    // written 1 MiB at a time and hashed on the way: the test never holds the recording
    const size = 20 * 1024 * 1024;
    const written = createHash('sha256');
    const file = createWriteStream(upload.path);
    for (let i = 0; i < 20; i++) {
      const chunk = randomBytes(1024 * 1024);
      written.update(chunk);
      if (!file.write(chunk)) await new Promise<void>((resolve) => file.once('drain', () => resolve()));
    }
    file.end();
    await finished(file);
    await upload.commit();
    expect(await gone(upload.path)).toBe(true);

    // a multipart upload: started, 4 parts of 5 MiB, completed
    const path = `/${BUCKET}/${prefix}/${k}`;
    const calls = s3.requests.filter((r) => r.split('?')[0]!.endsWith(path)).map((r) => r.replace(/uploadId=[^&]+/, 'uploadId=…'));
    expect(calls.filter((r) => r.startsWith(`POST ${path}?uploads`))).toHaveLength(1);
    expect(calls.filter((r) => /^PUT .*partNumber=\d/.test(r))).toHaveLength(4);
    expect(calls.filter((r) => r.startsWith(`POST ${path}?uploadId=…`))).toHaveLength(1);
    const client = testClient(s3.endpoint);
    const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `${prefix}/${k}` }));
    expect(head.ContentType).toBe('audio/wav');
    expect(head.ContentLength).toBe(size);
    client.destroy();

    const stored = (await store.open(k))!;
    expect(stored.size).toBe(size);
    const read = createHash('sha256');
    let bytes = 0;
    for await (const chunk of stored.stream) {
      read.update(chunk as Buffer);
      bytes += (chunk as Buffer).length;
    }
    expect(bytes).toBe(size);
    expect(read.digest('hex')).toBe(written.digest('hex'));
    await store.close();
  });

  it('objects are written as they are: no checksum framing in the bytes (WHEN_REQUIRED)', async () => {
    const dataDir = await mkdtemp(join(root, 'plain-'));
    const prefix = `plain/${randomUUID()}`;
    const store = recordingStoreFromConfig({ DATA_DIR: dataDir, RECORDINGS_S3_URL: s3Url(s3.endpoint, prefix) });
    const k = recordingKey('org_a', randomUUID());
    const bytes = wavBytes(1000);
    await record(store, k, bytes);
    const client = testClient(s3.endpoint);
    const object = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}/${k}` }));
    expect(Buffer.from(await object.Body!.transformToByteArray()).equals(bytes)).toBe(true);
    client.destroy();
    await store.close();
  });

  it('a failed upload (the server is gone) rejects, and deletes the local file', async () => {
    const dataDir = await mkdtemp(join(root, 'down-'));
    const down = await startS3(join(root, 's3rver-down'));
    const store = recordingStoreFromConfig({ DATA_DIR: dataDir, RECORDINGS_S3_URL: s3Url(down.endpoint) });
    const k = recordingKey('org_a', randomUUID());
    const upload = await store.begin(k);
    await writeFile(upload.path, wavBytes(2000));
    await down.stop();
    const error = await upload.commit().then(
      () => null,
      (err: unknown) => err as Error,
    );
    expect(error).toBeInstanceOf(Error);
    expect(error!.message).toMatch(new RegExp(`^could not upload the recording ${k} in S3 bucket ${BUCKET}: .*ECONNREFUSED`));
    expect(await gone(upload.path)).toBe(true);
    // a failed commit can be tried again only with a file: discarding it is fine
    await upload.discard();
    await store.close();
  });

  it('refused credentials fail with the server\'s refusal, never the secret', async () => {
    const dataDir = await mkdtemp(join(root, 'creds-'));
    const secret = 'the-secret/of+an@unknown:key';
    // s3rver does not check SigV4 signatures, only that it knows the key id
    const url = `s3://UNKNOWNKEY:${encodeURIComponent(secret)}@${BUCKET}/creds?endpoint=${s3.endpoint}`;
    const store = recordingStoreFromConfig({ DATA_DIR: dataDir, RECORDINGS_S3_URL: url });
    const k = recordingKey('org_a', randomUUID());
    const errors: Error[] = [];
    await store.exists(k).catch((err: Error) => errors.push(err));
    const upload = await store.begin(k);
    await writeFile(upload.path, wavBytes(100));
    await upload.commit().catch((err: Error) => errors.push(err));
    expect(errors).toHaveLength(2);
    expect(errors[0]!.message).toMatch(/^could not look for the recording .* in S3 bucket recordings: HTTP 403 Forbidden$/);
    expect(errors[1]!.message).toMatch(/^could not upload the recording .*: The AWS Access Key Id you provided does not exist in our records/);
    for (const err of errors) {
      expect(`${err.message} ${inspect(err, { depth: 8 })}`).not.toContain(secret);
      expect(`${err.message} ${inspect(err, { depth: 8 })}`).not.toContain(encodeURIComponent(secret));
    }
    await store.close();
  });
});

describe('RecordingPruner', () => {
  it('deletes, through the store, the recordings older than RECORDING_RETENTION_DAYS, and logs how many went', async () => {
    const dataDir = await mkdtemp(join(root, 'pruner-'));
    const store = recordingStoreFromConfig({ DATA_DIR: dataDir });
    const now = Date.now();
    const old = recordingKey('org_a', 'old');
    await record(store, old, wavBytes(100));
    await record(store, recordingKey('org_a', 'recent'), wavBytes(100));
    const when = new Date(now - 31 * DAY_MS);
    await utimes(join(dataDir, 'recordings', old), when, when);
    const lines: Record<string, unknown>[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
          done();
        },
      }),
    );
    const pruner = new RecordingPruner({ recordings: store, retentionDays: 30, logger, now: () => now });
    expect(await pruner.runOnce()).toBe(1);
    expect(await store.exists(old)).toBe(false);
    expect(await store.exists(recordingKey('org_a', 'recent'))).toBe(true);
    expect(lines).toEqual([
      expect.objectContaining({ msg: 'pruned old call recordings', deleted: 1, retention_days: 30, cutoff: new Date(now - 30 * DAY_MS).toISOString() }),
    ]);
    // 0 days: kept forever
    expect(await new RecordingPruner({ recordings: store, retentionDays: 0, logger }).runOnce()).toBe(0);
    await pruner.stop();
  });
});

describe('recordingKey', () => {
  it('is <org>/<call>.wav', () => {
    expect(recordingKey('org_1', 'c4a8e2f1-7b3d-4e59-9a06-1f5e8d2b6c73')).toBe('org_1/c4a8e2f1-7b3d-4e59-9a06-1f5e8d2b6c73.wav');
  });

  it.each([['../x', 'call'], ['org', '../x'], ['org/x', 'call'], ['', 'call'], ['org', ''], ['org', 'a.wav'], ['org', 'x'.repeat(129)]])(
    'refuses %j, %j',
    (org, call) => {
      expect(() => recordingKey(org, call)).toThrow(/a recording key needs an? (organization|call) id of letters, digits, _ and -/);
    },
  );
});

describe('parseRecordingsS3Url', () => {
  it('reads a bucket alone: AWS S3 in us-east-1, virtual-hosted style, the SDK\'s default credentials', () => {
    const location = parseRecordingsS3Url('s3://my-recordings');
    expect(location).toEqual({ bucket: 'my-recordings', prefix: '', region: 'us-east-1', forcePathStyle: false });
    expect(location.credentials).toBeUndefined();
  });

  it('reads credentials (URL-decoded), a prefix and a region', () => {
    const location = parseRecordingsS3Url('s3://AKIAEXAMPLE:wJal%2FrXUtn%2BFEMI%40K7MDENG@my-recordings/calls/2025/?region=eu-west-1');
    expect(location).toMatchObject({ bucket: 'my-recordings', prefix: 'calls/2025', region: 'eu-west-1', forcePathStyle: false });
    expect(location.credentials).toEqual({ accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'wJal/rXUtn+FEMI@K7MDENG' });
    // logged as JSON or inspected, the location does not show the secret
    expect(JSON.stringify(location)).not.toContain('wJal');
    expect(inspect(location, { depth: 5 })).not.toContain('wJal');
  });

  it('with an endpoint, path style is the default; force_path_style overrides it', () => {
    expect(parseRecordingsS3Url('s3://rec/calls?endpoint=http://127.0.0.1:9000')).toEqual({
      bucket: 'rec',
      prefix: 'calls',
      region: 'us-east-1',
      endpoint: 'http://127.0.0.1:9000',
      forcePathStyle: true,
    });
    expect(parseRecordingsS3Url('s3://rec?region=auto&endpoint=https://acct.r2.cloudflarestorage.com/&force_path_style=false')).toMatchObject({
      region: 'auto',
      endpoint: 'https://acct.r2.cloudflarestorage.com',
      forcePathStyle: false,
    });
    expect(parseRecordingsS3Url('s3://rec?force_path_style=true').forcePathStyle).toBe(true);
  });

  const SECRET = 'TopSecret99';
  it.each([
    [`https://KEY:${SECRET}@rec/calls`, 'must start with s3://'],
    [`s3://KEY:${SECRET}@/calls`, 'is not a valid URL'],
    ['s3:///calls', 'names no bucket'],
    ['s3:rec/calls', 'names no bucket'],
    [`s3://KEY:${SECRET}@Rec_Bucket`, 'has a bucket name that is not valid'],
    [`s3://KEY:${SECRET}@rec:9000`, 'must not have a port after the bucket'],
    [`s3://KEY:${SECRET}/x@rec`, 'is not a valid URL'],
    [`s3://KEY@rec?secret=${SECRET}`, 'must give both the access key id and the secret'],
    [`s3://:${SECRET}@rec`, 'must give both the access key id and the secret'],
    [`s3://KEY:${SECRET}%zz@rec`, 'not valid percent-encoding'],
    [`s3://KEY:${SECRET}@rec?endpoint=ftp://${SECRET}.example`, 'has an endpoint that is not an http:// or https:// URL'],
    [`s3://KEY:${SECRET}@rec?endpoint=${SECRET}`, 'has an endpoint that is not an http:// or https:// URL'],
    [`s3://rec?endpoint=http://u:${SECRET}@minio:9000`, 'has an endpoint with credentials in it'],
    [`s3://KEY:${SECRET}@rec?regoin=eu-west-1`, 'has an unknown parameter "regoin"'],
    [`s3://rec?${SECRET}=1`, 'has an unknown parameter: only region, endpoint and force_path_style are read'],
    [`s3://KEY:${SECRET}@rec?region=eu-west-1&region=us-east-1`, 'gives region more than once'],
    [`s3://KEY:${SECRET}@rec?region=EU%20West`, 'has a region that is not valid'],
    [`s3://KEY:${SECRET}@rec?force_path_style=yes`, 'has force_path_style that is neither true nor false'],
    [`s3://KEY:${SECRET}@rec#${SECRET}`, 'must not have a #fragment'],
    [`s3://KEY:${SECRET}@rec/a//b`, 'has a prefix with an empty folder'],
  ])('refuses %s, never showing the secret', (url, message) => {
    let error: Error | undefined;
    try {
      parseRecordingsS3Url(url);
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).toContain(message);
    expect(inspect(error)).not.toContain(SECRET);
  });
});
