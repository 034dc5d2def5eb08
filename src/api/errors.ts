/**
 * One error type for every API failure, each with a stable `error` phrase (DECISIONS 2), and the
 * Fastify error handler that turns anything thrown into exactly those bodies.
 */
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';
import { formatZodIssues } from '../../engine/validate.js';
import { ConflictError, InUseError, UnknownReferenceError } from '../store/errors.js';
import { isOutage, RETRY_AFTER_SECONDS } from '../store/outage.js';

export interface ErrorBody {
  error: string;
  message?: string;
  details?: string[];
}

export class ApiError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.API_ERROR] as const;
  constructor(
    readonly statusCode: number,
    readonly error: string,
    message?: string,
    readonly details?: string[],
    readonly headers: Record<string, string> = {},
  ) {
    super(ErrorCodes.API_ERROR, message ?? error);
  }

  body(): ErrorBody {
    const body: ErrorBody = { error: this.error };
    if (this.message && this.message !== this.error) body.message = this.message;
    if (this.details) body.details = this.details;
    return body;
  }
}

export const invalidRequest = (details: string[], message = 'The request is not valid.') =>
  new ApiError(400, 'Invalid request', message, details);
export const invalidDefinition = (details: string[]) =>
  new ApiError(400, 'Invalid workflow definition', undefined, details);
export const invalidApiKey = (message: string) => new ApiError(401, 'Invalid API key', message);
export const notFound = (what: string, id: string) =>
  new ApiError(404, 'Not found', `No ${what} with id ${JSON.stringify(id)}.`);
export const inUse = (message: string, details: string[]) =>
  new ApiError(409, 'In use', message, details);
/** A value that must be unique is taken: `number +1… is already registered` (each detail, path first). */
export const conflict = (details: string[]) =>
  new ApiError(409, 'Conflict', details.map((d) => d.replace(/^([^:\s]+): /, '$1 ')).join('; '), details);

/** `1 MiB`, `64 KiB`, `1500 bytes`. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/** 413 naming the limit of the route that refused the body. */
export const payloadTooLarge = (limitBytes: number) =>
  new ApiError(413, 'Payload too large', `The request body is over the ${formatBytes(limitBytes)} limit.`);

/** A request part that failed its zod schema (params, query, body, headers). */
export class RequestValidationError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.REQUEST_INVALID] as const;
  constructor(
    readonly part: string,
    readonly issues: readonly z.core.$ZodIssue[],
  ) {
    super(ErrorCodes.REQUEST_INVALID, `invalid ${part}`);
  }
}

export function registerErrorHandler(app: FastifyInstance): void {
  app.setNotFoundHandler((request, reply) => {
    void reply
      .code(404)
      .send({ error: 'Not found', message: `No route ${request.method} ${request.url.split('?')[0]}.` });
  });

  app.setErrorHandler(sendError);
}

function sendError(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const apiError = toApiError(err, request);
  if (apiError.statusCode === 503) {
    request.log.warn({ err }, 'request refused: the database or Redis does not answer');
  } else if (apiError.statusCode >= 500) {
    request.log.error({ err }, 'request failed');
  } else {
    request.log.info({ status: apiError.statusCode, error: apiError.error }, 'request refused');
  }
  void reply.headers(apiError.headers).code(apiError.statusCode).send(apiError.body());
}

/**
 * Fastify's `frameworkErrors` option: errors met before routing (a bad percent-encoding, an
 * over-long path parameter) get the same bodies as every other error, not Fastify's own.
 */
export const frameworkErrors = (err: FastifyError, request: FastifyRequest, reply: FastifyReply) =>
  sendError(err, request, reply);

/** The body limit that applied to this request: the route's own, else the server's. */
function bodyLimitOf(request: FastifyRequest): number | undefined {
  try {
    return request.routeOptions.bodyLimit;
  } catch {
    return undefined; // before routing, there is no route
  }
}

/**
 * Fastify's `clientErrorHandler` option: what Node's HTTP parser refuses before there is a
 * request (headers over the limit, a request too slow to arrive, bytes that are not HTTP) is
 * answered with the same bodies as everything else, not Fastify's own `{statusCode, …}`.
 */
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const apiError =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new ApiError(431, 'Request headers too large', `The request headers are over the ${formatBytes(maxHeaderSize)} limit.`)
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new ApiError(408, 'Request timeout', 'The request did not arrive in time.')
        : invalidRequest(['request: not valid HTTP/1.1'], 'The request could not be read.');
  this.log.debug({ err, status: apiError.statusCode }, 'client error');
  if (socket.writable) {
    const body = JSON.stringify(apiError.body());
    socket.write(
      `HTTP/1.1 ${apiError.statusCode} ${STATUS_CODES[apiError.statusCode]}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** 503 while the database or Redis does not answer (DECISIONS 2, 22): nothing was done; try again. */
export const unavailable = () =>
  new ApiError(503, 'Unavailable', 'The database or the queue is not reachable right now; nothing was done. Try again shortly.', undefined, {
    'Retry-After': String(RETRY_AFTER_SECONDS),
  });

/** 503: no process took a call's control word in time; it was withdrawn, nothing was done (DECISIONS 16). */
export const notTaken = () =>
  new ApiError(
    503,
    'Unavailable',
    'The process that runs the call did not take the word within 5 s (it may be restarting); it was withdrawn and nothing was done. Try again shortly.',
    undefined,
    { 'Retry-After': String(RETRY_AFTER_SECONDS) },
  );

function toApiError(err: unknown, request: FastifyRequest): ApiError {
  if (err instanceof ApiError) return err;
  if (isOutage(err)) return unavailable();
  if (err instanceof InUseError) {
    const count = err.numbers.length;
    return inUse(
      `The ${err.resource} is used by ${count} phone number${count === 1 ? '' : 's'}; detach ${count === 1 ? 'it' : 'them'} with PATCH /numbers/{id} (${err.resource}_id: null) first.`,
      err.numbers.map((n) => `number ${n.id} (${n.number})`),
    );
  }
  if (err instanceof UnknownReferenceError) return invalidRequest(err.details);
  if (err instanceof ConflictError) return conflict(err.details);
  if (err instanceof RequestValidationError) {
    const where = err.part === 'params' ? 'path' : err.part === 'querystring' ? 'query' : err.part;
    if (err.part === 'params') return new ApiError(404, 'Not found', 'No such resource.');
    // The body names the nodes and edges of a definition in it (`definition.nodes[2] (desk).prompt: …`).
    const input = err.part === 'body' ? request.body : undefined;
    return invalidRequest(formatZodIssues(err.issues, where === 'body' ? '' : where, input));
  }
  const e = err as FastifyError;
  switch (e.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return invalidRequest([`body: ${e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'empty, but Content-Type is application/json' : 'malformed JSON'}`]);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return invalidRequest(['body: Content-Type must be application/json']);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalidRequest(['body: Content-Length does not match the body']);
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return tooLarge(request);
    case 'FST_ERR_BAD_URL':
      return invalidRequest(['path: not a valid URL (malformed percent-encoding)']);
    case 'FST_ERR_MAX_PARAM_LENGTH':
      // an id this long cannot be a UUID: like any other non-UUID id
      return new ApiError(404, 'Not found', 'No such resource.');
    default:
      break;
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    if (e.statusCode === 413) return tooLarge(request);
    if (e.statusCode === 429) return new ApiError(429, 'Too many requests', e.message);
    return invalidRequest([e.message]);
  }
  return new ApiError(500, 'Internal error', `request ${request.id}`);
}

function tooLarge(request: FastifyRequest): ApiError {
  const limit = bodyLimitOf(request);
  return limit === undefined
    ? new ApiError(413, 'Payload too large', 'The request body is over the limit.')
    : payloadTooLarge(limit);
}
