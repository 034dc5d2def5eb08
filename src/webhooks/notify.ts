/**
 * One attempt at a notification (`status-update`, `end-of-call-report`) and what follows from it
 * (DECISIONS 7): delivered on 2xx; retried on connection errors, timeouts, 408, 429 and 5xx on
 * the schedule 0, 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h; final on any other status
 * (3xx included: redirects are not followed) and on a refused or invalid URL. Both queue
 * implementations run their attempts through `NotificationSender`.
 */
import { callTraceparent, endSpan, parseTraceparent, startSpan, tracingEnabled } from '../observability/tracing.js';
import type { Logger } from 'pino';
import type { DeliveryAttemptRecord, DeliveryOutcome } from '../store/deliveries.js';
import type { Clock } from './clock.js';
import type { WebhookBody, WebhookMessage } from './envelope.js';
import { redactUrl, type HttpOutcome, type WebhookHttpClient } from './http.js';
import { newMessageId, webhookRequestHeaders } from './sign.js';
import type { WebhookTarget } from './target.js';
import { maskUrlCredentials } from './url-credentials.js';

/** Delay before attempt n+1 (index n); 9 attempts in all, about 10 h 42 min from first to last. */
export const RETRY_SCHEDULE_MS: readonly number[] = [
  0,
  5_000,
  30_000,
  2 * 60_000,
  10 * 60_000,
  30 * 60_000,
  60 * 60_000,
  3 * 60 * 60_000,
  6 * 60 * 60_000,
];

export const NOTIFICATION_TIMEOUT_MS = 15_000;

export type NotificationEvent = 'status-update' | 'end-of-call-report';

/** A queued notification: everything an attempt needs, the body serialized once. */
export interface Notification {
  /** `X-Webhook-Id`, fixed for the life of the message. */
  id: string;
  organization_id: string;
  call_id: string;
  event: NotificationEvent;
  url: string;
  secret: string | null;
  /** The exact bytes sent on every attempt. */
  body: string;
  /** Unix ms when it was queued. */
  created_at: number;
  /** Attempts already made before it was queued again (the reconciler, after the queue lost it). */
  attempts?: number;
  /** The call's trace (W3C `traceparent`), when tracing is on: each attempt is a `webhook` span in it. */
  traceparent?: string;
}

/** Where attempts are written (the delivery repository in production). */
export interface DeliveryRecorder {
  record(attempt: DeliveryAttemptRecord): Promise<void>;
}

/** Makes the queued form of a message: a new message id and the body serialized once. */
export function createNotification(input: {
  organizationId: string;
  callId: string;
  target: Pick<WebhookTarget, 'url' | 'secret'>;
  body: WebhookBody<Extract<WebhookMessage, { type: NotificationEvent }>>;
  now?: number;
}): Notification {
  const traceparent = callTraceparent(input.callId);
  return {
    id: newMessageId(),
    organization_id: input.organizationId,
    call_id: input.callId,
    event: input.body.message.type,
    url: input.target.url,
    secret: input.target.secret,
    body: JSON.stringify(input.body),
    created_at: input.now ?? Date.now(),
    ...(traceparent ? { traceparent } : {}),
  };
}

export type Verdict = 'delivered' | 'retry' | 'final';

/** What an HTTP outcome means for a notification; `error` is the tenant's view (no network detail). */
export function notificationVerdict(outcome: HttpOutcome): { verdict: Verdict; error: string | null } {
  if (!outcome.ok) {
    const retry = outcome.code === 'CONNECTION_FAILED' || outcome.code === 'TIMEOUT' || outcome.code === 'DNS_FAILED';
    return { verdict: retry ? 'retry' : 'final', error: outcome.reason };
  }
  const s = outcome.status;
  if (s >= 200 && s < 300) return { verdict: 'delivered', error: null };
  if (s === 408 || s === 429 || s >= 500) return { verdict: 'retry', error: `HTTP ${s}` };
  if (s >= 300 && s < 400) return { verdict: 'final', error: `HTTP ${s}: redirects are not followed` };
  return { verdict: 'final', error: `HTTP ${s}` };
}

export interface AttemptResult {
  outcome: DeliveryOutcome;
  /** With `retrying`: how long until the next attempt. */
  retryInMs: number | null;
}

export interface NotificationSenderOptions {
  http: WebhookHttpClient;
  clock: Clock;
  logger: Logger;
  recorder?: DeliveryRecorder | null;
  /** Default `RETRY_SCHEDULE_MS`; tests of the Redis queue shorten it (Redis keeps real time). */
  retryScheduleMs?: readonly number[];
  /** Default 15 s. */
  timeoutMs?: number;
}

/** Sends one attempt of a notification, records it, and says what comes next. */
export class NotificationSender {
  readonly schedule: readonly number[];
  private readonly timeoutMs: number;

  constructor(private readonly options: NotificationSenderOptions) {
    this.schedule = options.retryScheduleMs ?? RETRY_SCHEDULE_MS;
    this.timeoutMs = options.timeoutMs ?? NOTIFICATION_TIMEOUT_MS;
  }

  /** `attempt` counts from 1. */
  async attempt(n: Notification, attempt: number): Promise<AttemptResult> {
    const parent = tracingEnabled() ? parseTraceparent(n.traceparent) : null;
    const span = parent ? startSpan('webhook', parent, { 'switchboard.webhook.event': n.event, 'switchboard.webhook.attempt': attempt, 'switchboard.call.id': n.call_id, 'url.full': redactUrl(n.url) }) : null;
    try {
      const result = await this.attemptOnce(n, attempt);
      endSpan(span, { 'switchboard.webhook.outcome': result.outcome }, result.outcome === 'delivered' ? undefined : result.outcome);
      return result;
    } catch (err) {
      endSpan(span, {}, (err as Error).message);
      throw err;
    }
  }

  private async attemptOnce(n: Notification, attempt: number): Promise<AttemptResult> {
    const { clock, http, logger } = this.options;
    const startedAt = clock.now();
    const headers = webhookRequestHeaders({
      event: n.event,
      messageId: n.id,
      timestampSeconds: Math.floor(startedAt / 1000),
      body: n.body,
      secret: n.secret,
    });
    const response = await http.post(n.url, { headers, body: n.body, timeoutMs: this.timeoutMs });
    const { verdict, error } = notificationVerdict(response);

    let outcome: DeliveryOutcome = verdict === 'delivered' ? 'delivered' : verdict === 'final' ? 'failed' : 'retrying';
    let retryInMs: number | null = null;
    if (outcome === 'retrying') {
      if (attempt < this.schedule.length) retryInMs = this.schedule[attempt]!;
      else outcome = 'gave-up';
    }
    const statusCode = response.ok ? response.status : null;
    const detail = response.ok ? undefined : response.detail;
    const fields = () => ({ callId: n.call_id, webhookId: n.id, event: n.event, url: redactUrl(n.url), attempt, statusCode, detail });
    if (outcome === 'delivered') {
      if (logger.isLevelEnabled('debug')) logger.debug({ ...fields(), durationMs: response.durationMs }, 'webhook delivered');
    } else if (outcome === 'retrying') {
      logger.info({ ...fields(), error, retryInMs }, 'webhook attempt failed; will retry');
    } else {
      logger.warn({ ...fields(), error }, outcome === 'gave-up' ? 'webhook given up after the last retry' : 'webhook failed; not retried');
    }

    await this.record({
      organization_id: n.organization_id,
      call_id: n.call_id,
      message_id: n.id,
      event: n.event,
      url: maskUrlCredentials(n.url),
      attempt,
      outcome,
      status_code: statusCode,
      error,
      duration_ms: response.durationMs,
      next_retry_at: retryInMs === null ? null : new Date(clock.now() + retryInMs).toISOString(),
      created_at: new Date(startedAt).toISOString(),
    });
    return { outcome, retryInMs };
  }

  private async record(attempt: DeliveryAttemptRecord): Promise<void> {
    if (!this.options.recorder) return;
    try {
      await this.options.recorder.record(attempt);
    } catch (err) {
      // the delivery itself matters more than its record
      this.options.logger.warn({ err, callId: attempt.call_id, webhookId: attempt.message_id }, 'could not record a webhook attempt');
    }
  }
}
