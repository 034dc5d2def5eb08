/**
 * Where call recordings are kept (docs/recordings.md): one stereo WAV per call, written to a local
 * file while the call runs (a recording is never held in memory), then kept in `DATA_DIR/recordings`
 * (the default) or uploaded to S3-compatible storage (`RECORDINGS_S3_URL`). Read back by
 * `GET /calls/{id}/recording` (src/api/call-recording.ts); deleted after RECORDING_RETENTION_DAYS
 * by `RecordingPruner` (src/recordings/retention.ts).
 *
 * This module is imported by src/config.ts (for `parseRecordingsS3Url`), so the AWS SDK is loaded
 * only when an S3 store is first used: the CLIs, the tests and a local deployment never pay for it.
 */
import { createReadStream } from 'node:fs';
import { mkdir, open, opendir, rename, rm, stat } from 'node:fs/promises';
import { STATUS_CODES } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { DAY_MS } from '../store/retention.js';
import { sealWav } from '../audio/wav.js';

/** A recording being written: the recorder writes `path`, then the call's end commits or discards it. */
export interface RecordingUpload {
  /** A local file path the recorder writes the WAV into while the call runs (its folder exists). */
  readonly path: string;
  /**
   * The file is complete: make it the recording of its key (local: renamed into place; S3: a
   * multipart upload streaming from the file, which is then deleted, also when the upload failed).
   * Never throws synchronously; rejects with an Error that names the recording and the cause.
   */
  commit(): Promise<void>;
  /** Throws the file away (the call ended with nothing worth keeping, or failed); after a commit, does nothing. */
  discard(): Promise<void>;
}

/** A kept recording, streamed: the caller reads or destroys `stream`. */
export interface StoredRecording {
  stream: Readable;
  /** Bytes, for Content-Length. */
  size: number;
}

export interface RecordingStore {
  readonly kind: 'local' | 's3';
  /** Where to write a new recording for `key` (`org/call.wav`, made by `recordingKey()`). */
  begin(key: string): Promise<RecordingUpload>;
  /**
   * The recording a call left unfinished when its process died, if this machine has its file: the
   * WAV gets its sizes from what was written and is kept as the call's recording. False when there
   * is none (another machine's, pruned, or not a recording).
   */
  salvage(key: string): Promise<boolean>;
  /** The recording, or null when there is none (never committed, discarded, or pruned). */
  open(key: string): Promise<StoredRecording | null>;
  exists(key: string): Promise<boolean>;
  /**
   * Deletes the recordings last modified before `cutoff` (and the files of uploads a crash left,
   * once a day old); returns how many recordings went. Stops early when `shouldStop()` says so.
   */
  prune(cutoff: Date, options?: { shouldStop?: () => boolean }): Promise<number>;
  /** Lets go of connections; the store is not used afterwards. */
  close(): Promise<void>;
}

/** An in-progress file this old belongs to no live call: a crash or a kill left it. */
export const STALE_UPLOAD_MS = DAY_MS;
const ID = /^[A-Za-z0-9_-]{1,128}$/;
/** Every key `recordingKey()` makes, and nothing else: a key is a path inside the store's folder. */
const KEY = /^[A-Za-z0-9_-]{1,128}\/[A-Za-z0-9_-]{1,128}\.wav$/;
const PART = '.part';

/**
 * The key of a call's recording: `<orgId>/<callId>.wav`. Both ids are checked to hold only
 * letters, digits, `_` and `-`, so that a key can never leave the store's folder (`../x`) nor
 * name something other than a recording.
 */
export function recordingKey(orgId: string, callId: string): string {
  if (!ID.test(orgId)) throw new RangeError('a recording key needs an organization id of letters, digits, _ and - (at most 128)');
  if (!ID.test(callId)) throw new RangeError('a recording key needs a call id of letters, digits, _ and - (at most 128)');
  return `${orgId}/${callId}.wav`;
}

/** The API path a call's recording is served at (`GET /calls/{id}/recording`); `recording_url` is it on PUBLIC_URL. */
export const recordingPath = (callId: string) => `/calls/${callId}/recording`;

function checkKey(key: string): string {
  if (!KEY.test(key)) throw new RangeError(`not a recording key: ${JSON.stringify(key)} (make keys with recordingKey())`);
  return key;
}

const errorText = (err: unknown): string => {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  return err.message || (typeof code === 'string' ? code : err.name);
};

/**
 * An AWS SDK error in a few words: S3's own message, or for an answer without a body (HEAD, a
 * proxy's refusal), its HTTP status.
 */
function s3ErrorText(err: unknown): string {
  const text = errorText(err);
  const status = (err as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata?.httpStatusCode;
  if (typeof status === 'number' && (text === 'UnknownError' || text === (err as Error).name)) {
    return `HTTP ${status} ${STATUS_CODES[status] ?? ''}`.trimEnd();
  }
  return text;
}

const isMissing = (err: unknown) => (err as { code?: unknown } | null)?.code === 'ENOENT';

/**
 * An upload whose file is `path`: `keep()` makes it the recording, one commit at a time;
 * `discard()` deletes the file. A commit that failed may be tried again, or discarded.
 */
function fileUpload(key: string, path: string, keep: () => Promise<void>): RecordingUpload {
  let state: 'open' | 'committing' | 'committed' | 'discarded' = 'open';
  return {
    path,
    async commit() {
      if (state !== 'open') {
        throw new Error(`the recording ${key} ${state === 'committing' ? 'is being committed' : `was already ${state}`}`);
      }
      state = 'committing';
      try {
        await keep();
        state = 'committed';
      } catch (err) {
        state = 'open';
        throw err;
      }
    },
    async discard() {
      if (state === 'committing' || state === 'committed') return;
      state = 'discarded';
      await rm(path, { force: true });
    },
  };
}

/** Seals and keeps an unfinished recording's file, if it is there and is one. */
async function salvagePart(upload: RecordingUpload): Promise<boolean> {
  try {
    if (!(await stat(upload.path)).isFile()) return false;
  } catch (err) {
    if (isMissing(err)) return false;
    throw err;
  }
  if ((await sealWav(upload.path)) === null) return false;
  await upload.commit();
  return true;
}

/**
 * Deletes, under `root`, the files a store wrote and a crash left behind (`*.wav.part`, older than
 * `STALE_UPLOAD_MS`), and when `recordingsBefore` is given the recordings (`*.wav`) older than it.
 * Other files are left alone. Returns how many recordings went.
 */
async function pruneFolder(
  root: string,
  now: number,
  recordingsBefore: Date | null,
  shouldStop: () => boolean,
): Promise<number> {
  let deleted = 0;
  const folders = [root];
  for (let folder = folders.pop(); folder !== undefined; folder = folders.pop()) {
    let dir;
    try {
      dir = await opendir(folder);
    } catch (err) {
      if (isMissing(err)) continue;
      throw err;
    }
    for await (const entry of dir) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) {
        folders.push(path);
        continue;
      }
      const isPart = entry.name.endsWith(`.wav${PART}`);
      const isRecording = recordingsBefore !== null && entry.name.endsWith('.wav');
      if (!entry.isFile() || (!isPart && !isRecording)) continue;
      const modified = await stat(path).then(
        (s) => s.mtimeMs,
        (err: unknown) => (isMissing(err) ? null : Promise.reject(err)),
      );
      if (modified === null) continue;
      if (isPart ? modified < now - STALE_UPLOAD_MS : modified < recordingsBefore!.getTime()) {
        await rm(path, { force: true });
        if (!isPart) deleted += 1;
      }
      if (shouldStop()) return deleted;
    }
  }
  return deleted;
}

/**
 * Recordings as files: `<root>/<key>`, written as `<root>/<key>.part` and renamed into place on
 * commit (a rename within one folder: a reader sees the whole recording or none). `open` never
 * returns a `.part`; `prune` deletes the ones a crash left once they are a day old.
 */
export class LocalRecordingStore implements RecordingStore {
  readonly kind = 'local';

  constructor(
    /** The folder of the recordings, `DATA_DIR/recordings`. */
    readonly root: string,
    private readonly now: () => number = Date.now,
  ) {}

  private pathOf(key: string): string {
    return join(this.root, checkKey(key));
  }

  async begin(key: string): Promise<RecordingUpload> {
    const part = `${this.pathOf(key)}${PART}`;
    await mkdir(dirname(part), { recursive: true });
    return this.upload(key);
  }

  async salvage(key: string): Promise<boolean> {
    return salvagePart(this.upload(key));
  }

  /** The upload of `key`'s `.part` file (renamed into place on commit). */
  private upload(key: string): RecordingUpload {
    const target = this.pathOf(key);
    const part = `${target}${PART}`;
    return fileUpload(key, part, async () => {
      try {
        await rename(part, target);
      } catch (err) {
        throw new Error(
          isMissing(err)
            ? `could not keep the recording ${key}: its file ${part} is missing (never written, or already discarded)`
            : `could not keep the recording ${key}: ${errorText(err)}`,
          { cause: err },
        );
      }
    });
  }

  async open(key: string): Promise<StoredRecording | null> {
    // the file is opened before its size is read: a prune in between cannot make them disagree
    let handle;
    try {
      handle = await open(this.pathOf(key), 'r');
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) {
        await handle.close();
        return null;
      }
      return { stream: handle.createReadStream({ autoClose: true }), size: info.size };
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
  }

  async exists(key: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(key))).isFile();
    } catch (err) {
      if (isMissing(err)) return false;
      throw err;
    }
  }

  async prune(cutoff: Date, options: { shouldStop?: () => boolean } = {}): Promise<number> {
    if (Number.isNaN(cutoff.getTime())) throw new RangeError('cutoff is not a valid date');
    return pruneFolder(this.root, this.now(), cutoff, options.shouldStop ?? (() => false));
  }

  async close(): Promise<void> {}
}

// ---------------------------------------------------------------------------------------------
// RECORDINGS_S3_URL

/** The documented shape of RECORDINGS_S3_URL (docs/recordings.md). */
export const RECORDINGS_S3_URL_FORMAT =
  's3://[ACCESS_KEY_ID:SECRET@]bucket[/prefix][?region=us-east-1&endpoint=https://host:port&force_path_style=true|false]';

/** Where recordings go in S3-compatible storage, read from RECORDINGS_S3_URL. */
export interface RecordingsS3Location {
  bucket: string;
  /** Prepended to every key with a `/`; '' for the bucket's top. */
  prefix: string;
  region: string;
  /** The server of an S3-compatible store (MinIO, R2, …); absent: AWS S3 of `region`. */
  endpoint?: string;
  /** `https://endpoint/bucket/key` rather than `https://bucket.endpoint/key`. */
  forcePathStyle: boolean;
  /**
   * From the URL's user info; absent: the AWS SDK's default chain (AWS_ACCESS_KEY_ID and
   * AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance or task role, …). Not enumerable, so that
   * logging the location (JSON or util.inspect) never shows the secret.
   */
  readonly credentials?: { accessKeyId: string; secretAccessKey: string };
}

const PARAMS = ['region', 'endpoint', 'force_path_style'] as const;
const BUCKET = /^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$/;
const REGION = /^[a-z0-9][a-z0-9-]{0,62}$/;

/**
 * RECORDINGS_S3_URL → where recordings go:
 * `s3://[ACCESS_KEY_ID:SECRET@]bucket[/prefix][?region=…&endpoint=…&force_path_style=…]`.
 *
 * - the key id and secret are URL-encoded (`/` in a secret is `%2F`); both or neither;
 * - `region` defaults to `us-east-1` (R2 takes `auto`);
 * - `endpoint`, an http(s) URL, is the server of an S3-compatible store; with it, path-style
 *   addressing is the default, as MinIO and most self-hosted stores need;
 * - `force_path_style=true|false` overrides that default.
 *
 * Throws an Error whose message says what is wrong, phrased to follow the variable's name
 * (`RECORDINGS_S3_URL: must start with s3://…`); it never contains the URL nor any part of it that
 * may be secret.
 */
export function parseRecordingsS3Url(value: string): RecordingsS3Location {
  const fail = (why: string): never => {
    throw new Error(why);
  };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    // the parser's own error carries the input: it is not passed on
    return fail(
      `is not a valid URL; the format is ${RECORDINGS_S3_URL_FORMAT} (percent-encode / : @ # ? in the key id and secret, e.g. / as %2F)`,
    );
  }
  if (url.protocol !== 's3:') fail('must start with s3://, e.g. s3://my-recordings/calls?region=eu-west-1');
  if (url.hostname === '') fail('names no bucket: s3://BUCKET/optional/prefix');
  if (url.port !== '') fail('must not have a port after the bucket; give an S3-compatible server as ?endpoint=http://host:port');
  if (!BUCKET.test(url.hostname)) {
    fail('has a bucket name that is not valid: 3 to 63 lowercase letters, digits, dots, hyphens or underscores');
  }
  if (url.hash !== '') fail('must not have a #fragment (percent-encode # in the secret as %23)');

  let credentials: RecordingsS3Location['credentials'];
  if (url.username !== '' || url.password !== '') {
    if (url.username === '' || url.password === '') {
      fail(
        "must give both the access key id and the secret (s3://KEY_ID:SECRET@bucket/...), or neither to use the AWS SDK's default credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...)",
      );
    }
    try {
      credentials = { accessKeyId: decodeURIComponent(url.username), secretAccessKey: decodeURIComponent(url.password) };
    } catch {
      fail('has an access key id or secret that is not valid percent-encoding');
    }
  }

  let prefix: string;
  try {
    prefix = decodeURIComponent(url.pathname).replace(/^\/+|\/+$/g, '');
  } catch {
    return fail('has a prefix that is not valid percent-encoding');
  }
  if (prefix.includes('//') || /[\u0000-\u001f\u007f]/.test(prefix)) fail('has a prefix with an empty folder (//) or a control character');

  const seen = new Set<string>();
  for (const name of url.searchParams.keys()) {
    if (!(PARAMS as readonly string[]).includes(name)) {
      fail(
        `has an unknown parameter${/^[a-z_]{1,24}$/.test(name) ? ` ${JSON.stringify(name)}` : ''}: only region, endpoint and force_path_style are read`,
      );
    }
    if (seen.has(name)) fail(`gives ${name} more than once`);
    seen.add(name);
  }
  const region = url.searchParams.get('region') ?? 'us-east-1';
  if (!REGION.test(region)) fail('has a region that is not valid: lowercase letters, digits and hyphens, e.g. region=eu-west-1 (auto for R2)');

  let endpoint: string | undefined;
  const endpointParam = url.searchParams.get('endpoint');
  if (endpointParam !== null) {
    const badEndpoint = 'has an endpoint that is not an http:// or https:// URL with a host and nothing after the path, e.g. endpoint=http://127.0.0.1:9000';
    let e: URL;
    try {
      e = new URL(endpointParam);
    } catch {
      return fail(badEndpoint);
    }
    if ((e.protocol !== 'http:' && e.protocol !== 'https:') || e.hostname === '' || e.search !== '' || e.hash !== '') fail(badEndpoint);
    if (e.username !== '' || e.password !== '') fail('has an endpoint with credentials in it: put them before the bucket, s3://KEY_ID:SECRET@bucket');
    endpoint = e.origin + (e.pathname === '/' ? '' : e.pathname.replace(/\/+$/, ''));
  }

  const pathStyle = url.searchParams.get('force_path_style');
  if (pathStyle !== null && pathStyle !== 'true' && pathStyle !== 'false') fail('has force_path_style that is neither true nor false');

  const location: RecordingsS3Location = {
    bucket: url.hostname,
    prefix,
    region,
    ...(endpoint === undefined ? {} : { endpoint }),
    forcePathStyle: pathStyle === null ? endpoint !== undefined : pathStyle === 'true',
  };
  if (credentials) Object.defineProperty(location, 'credentials', { value: credentials, enumerable: false });
  return location;
}

// ---------------------------------------------------------------------------------------------
// S3

type S3Sdk = typeof import('@aws-sdk/client-s3');

/** Parts of a multipart upload: S3's smallest; the SDK reads the file a part at a time. */
const PART_SIZE = 5 * 1024 * 1024;
/** Parts in flight at once: about PART_SIZE × (this + 1) of memory per upload, whatever the call's length. */
const PARTS_AT_ONCE = 2;
/** DeleteObjects takes at most this many keys. */
const DELETE_BATCH = 1000;

/** A GetObject / HeadObject answer that means "no such object" (not "no such bucket"). */
function isNoSuchObject(err: unknown): boolean {
  const e = err as { name?: unknown; $metadata?: { httpStatusCode?: unknown } } | null;
  if (e?.name === 'NoSuchBucket') return false;
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

export interface S3RecordingStoreOptions {
  /** Keys per ListObjectsV2 page (1000, S3's largest, by default; the tests use fewer). */
  listPageSize?: number;
  now?: () => number;
}

/**
 * Recordings in S3-compatible storage, as `<prefix>/<key>` in one bucket. A recording is written
 * to a local file under `uploadDir` while the call runs and uploaded on commit (multipart,
 * streamed from the file, so memory holds a few parts at most, never the recording); the file is
 * deleted afterwards whether the upload worked or not.
 */
export class S3RecordingStore implements RecordingStore {
  readonly kind = 's3';
  private client: Promise<{ s3: S3Client; sdk: S3Sdk }> | null = null;
  private closed = false;

  constructor(
    readonly location: RecordingsS3Location,
    /** Where in-progress recordings are written, `DATA_DIR/recordings-upload`. */
    readonly uploadDir: string,
    private readonly options: S3RecordingStoreOptions = {},
  ) {}

  /** The client, made on first use (the SDK is loaded then, not when this module is). */
  private connect(): Promise<{ s3: S3Client; sdk: S3Sdk }> {
    if (this.closed) return Promise.reject(new Error('the recording store is closed'));
    this.client ??= import('@aws-sdk/client-s3').then((sdk) => {
      const { region, endpoint, forcePathStyle, credentials } = this.location;
      const s3 = new sdk.S3Client({
        region,
        forcePathStyle,
        ...(endpoint === undefined ? {} : { endpoint }),
        // absent: the SDK's default chain (environment, profile, instance or task role)
        ...(credentials ? { credentials } : {}),
        // Since early 2025 (3.729) the SDK by default sends a CRC32 checksum with every upload,
        // streamed bodies as `aws-chunked` with the checksum in a trailer, and asks for checksums
        // back. AWS S3 takes that; S3-compatible stores do not all do so (s3rver, older MinIO and
        // Ceph releases, other vendors' gateways): they refuse the request or, worse, keep the
        // chunk framing as the object's bytes. WHEN_REQUIRED sends a checksum only where the API
        // requires one (DeleteObjects) and plain bodies otherwise, and validates none it did not
        // ask for.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      });
      return { s3, sdk };
    });
    return this.client;
  }

  private objectKey(key: string): string {
    checkKey(key);
    return this.location.prefix ? `${this.location.prefix}/${key}` : key;
  }

  private where(key: string): string {
    return `${key} in S3 bucket ${this.location.bucket}`;
  }

  async begin(key: string): Promise<RecordingUpload> {
    await mkdir(dirname(join(this.uploadDir, `${key}${PART}`)), { recursive: true });
    return this.upload(key);
  }

  async salvage(key: string): Promise<boolean> {
    return salvagePart(this.upload(key));
  }

  /** The upload of `key`'s local `.part` file (a multipart upload on commit). */
  private upload(key: string): RecordingUpload {
    const objectKey = this.objectKey(key);
    const path = join(this.uploadDir, `${key}${PART}`);
    return fileUpload(key, path, async () => {
      try {
        const size = await stat(path).then(
          (s) => s.size,
          (err: unknown) => Promise.reject(isMissing(err) ? new Error(`its file ${path} is missing (never written, or already discarded)`) : err),
        );
        const { s3 } = await this.connect();
        const { Upload } = await import('@aws-sdk/lib-storage');
        const body = createReadStream(path);
        try {
          await new Upload({
            client: s3,
            params: { Bucket: this.location.bucket, Key: objectKey, Body: body, ContentType: 'audio/wav', ContentLength: size },
            partSize: PART_SIZE,
            queueSize: PARTS_AT_ONCE,
            // a failed multipart upload is aborted, so that its parts are not kept (and billed)
            leavePartsOnError: false,
          }).done();
        } finally {
          body.destroy();
        }
      } catch (err) {
        throw new Error(`could not upload the recording ${this.where(key)}: ${s3ErrorText(err)}`, { cause: err });
      } finally {
        // uploaded, or failed for good (the SDK has retried): the local copy goes either way
        await rm(path, { force: true });
      }
    });
  }

  async open(key: string): Promise<StoredRecording | null> {
    const Key = this.objectKey(key);
    const { s3, sdk } = await this.connect();
    try {
      const object = await s3.send(new sdk.GetObjectCommand({ Bucket: this.location.bucket, Key }));
      // in Node the body is an http.IncomingMessage (a Readable)
      const stream = object.Body as Readable | undefined;
      if (!stream) return null;
      return { stream, size: object.ContentLength ?? 0 };
    } catch (err) {
      if (isNoSuchObject(err)) return null;
      throw new Error(`could not read the recording ${this.where(key)}: ${s3ErrorText(err)}`, { cause: err });
    }
  }

  /** HeadObject; an answer to HEAD has no body, so a missing bucket is "no recording" here (open() tells them apart). */
  async exists(key: string): Promise<boolean> {
    const Key = this.objectKey(key);
    const { s3, sdk } = await this.connect();
    try {
      await s3.send(new sdk.HeadObjectCommand({ Bucket: this.location.bucket, Key }));
      return true;
    } catch (err) {
      if (isNoSuchObject(err)) return false;
      throw new Error(`could not look for the recording ${this.where(key)}: ${s3ErrorText(err)}`, { cause: err });
    }
  }

  /**
   * Lists the recordings under the prefix page by page and deletes, page by page, those last
   * modified before `cutoff`. Only keys a recording can have (`<prefix>/<org>/<call>.wav`) are
   * deleted: a bucket shared with other data loses nothing else.
   */
  async prune(cutoff: Date, options: { shouldStop?: () => boolean } = {}): Promise<number> {
    if (Number.isNaN(cutoff.getTime())) throw new RangeError('cutoff is not a valid date');
    const shouldStop = options.shouldStop ?? (() => false);
    // uploads a crash left on this machine
    await pruneFolder(this.uploadDir, this.options.now?.() ?? Date.now(), null, shouldStop);
    const { s3, sdk } = await this.connect();
    const Bucket = this.location.bucket;
    const Prefix = this.location.prefix ? `${this.location.prefix}/` : undefined;
    const send = async <T>(what: string, request: Promise<T>): Promise<T> => {
      try {
        return await request;
      } catch (err) {
        throw new Error(`could not ${what} the recordings in S3 bucket ${Bucket}: ${s3ErrorText(err)}`, { cause: err });
      }
    };
    let deleted = 0;
    let ContinuationToken: string | undefined;
    do {
      const page = await send(
        'list',
        s3.send(new sdk.ListObjectsV2Command({ Bucket, Prefix, ContinuationToken, MaxKeys: this.options.listPageSize ?? DELETE_BATCH })),
      );
      const old = (page.Contents ?? [])
        .filter((o) => o.Key !== undefined && KEY.test(o.Key.slice(Prefix?.length ?? 0)) && o.LastModified !== undefined && o.LastModified < cutoff)
        .map((o) => ({ Key: o.Key! }));
      for (let at = 0; at < old.length; at += DELETE_BATCH) {
        const Objects = old.slice(at, at + DELETE_BATCH);
        const result = await send('delete', s3.send(new sdk.DeleteObjectsCommand({ Bucket, Delete: { Objects, Quiet: true } })));
        const errors = result.Errors ?? [];
        deleted += Objects.length - errors.length;
        if (errors.length > 0) {
          const first = errors[0]!;
          throw new Error(
            `could not delete ${errors.length} of ${Objects.length} old recordings in S3 bucket ${Bucket} (${first.Code ?? 'error'}: ${first.Message ?? 'no message'}); ${deleted} were deleted`,
          );
        }
      }
      // like the database's prunes, at least one batch, then as told
      if (shouldStop()) return deleted;
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
    return deleted;
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = null;
    if (client) (await client.catch(() => null))?.s3.destroy();
  }
}

/**
 * The store of a deployment: S3-compatible storage when RECORDINGS_S3_URL is set (in-progress
 * files under `DATA_DIR/recordings-upload`), else files under `DATA_DIR/recordings`.
 */
export function recordingStoreFromConfig(config: { DATA_DIR: string; RECORDINGS_S3_URL?: string | undefined }): RecordingStore {
  const dataDir = resolve(config.DATA_DIR);
  if (config.RECORDINGS_S3_URL) {
    let location: RecordingsS3Location;
    try {
      location = parseRecordingsS3Url(config.RECORDINGS_S3_URL);
    } catch (err) {
      throw new Error(`RECORDINGS_S3_URL ${errorText(err)}`);
    }
    return new S3RecordingStore(location, join(dataDir, 'recordings-upload'));
  }
  return new LocalRecordingStore(join(dataDir, 'recordings'));
}
