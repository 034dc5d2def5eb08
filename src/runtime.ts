/**
 * The live-call side of one process: provider adapters, the webhook sender and its durable
 * queue, call sessions with the call log beside them, the call service that joins them, and the
 * pruners of old delivery attempts and old calls.
 */
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Store } from './store/index.js';
import { DeliveryRepository } from './store/deliveries.js';
import type { Providers } from './providers/types.js';
import { createProviders, providerSettings } from './providers/index.js';
import { WebhookService } from './webhooks/service.js';
import { DeliveryPruner } from './webhooks/retention.js';
import { createCallStore, type CallStore } from './calls/store.js';
import { CallLogPruner, LoggedCallStore } from './calls/call-log.js';
import { CallService } from './calls/service.js';
import { WebhookCallNotifier } from './calls/webhook-notifier.js';
import type { TwilioRest } from './telephony/twilio/rest.js';
import type { TurnLatency } from './calls/latency.js';
import type { CallNotifier } from './calls/notifier.js';
import type { AssistantResolver } from './calls/service.js';
import { DEFAULT_MEDIA_LIVENESS, StreamWatcher, type MediaLiveness } from './telephony/liveness.js';
import type { TwilioTelephony } from './telephony/twilio/transport.js';
import type { SipTimers } from './telephony/sip/endpoint.js';
import type { SipTelephony } from './telephony/sip/telephony.js';
import type { WebTelephony } from './telephony/web/transport.js';
import { Carriers } from './telephony/carriers.js';
import { carrier as twilioCarrier } from './telephony/twilio/carrier.js';
import { carrier as sipCarrier } from './telephony/sip/carrier.js';
import { carrier as webCarrier } from './telephony/web/carrier.js';
import { Metrics } from './metrics.js';
import { createCallControl, type CallControl } from './calls/control.js';
import { ListenHub } from './calls/listen.js';
import { createDialer } from './calls/dialer.js';
import { OutboundCalls } from './calls/outbound-calls.js';
import { NotificationEmails, type NotificationEmailsOptions } from './notifications/service.js';
import { BackgroundAudio } from './audio/background.js';
import { recordingStoreFromConfig, type RecordingStore } from './recordings/storage.js';
import { RecordingPruner } from './recordings/retention.js';
import { ProviderKeys } from './providers/keys.js';
import { randomUUID } from 'node:crypto';
import { NotificationRepository } from './store/notifications.js';
import { Outbox, type OutboxOptions } from './store/outbox.js';
import type { DeliveryAttemptRecord } from './store/deliveries.js';
import type { Notification } from './webhooks/notify.js';
import { NotificationReconciler, type ReconcilerOptions } from './webhooks/reconciler.js';
import { RedisConnections } from './redis.js';
import { createQueues, type Queues } from './queue/index.js';
import { EmailAttemptPruner } from './notifications/retention.js';

const NOTIFICATION_EVENTS = new Set(['status-update', 'end-of-call-report']);

export interface Runtime {
  /** Every Redis connection of the process (REDIS_URL), closed last by `close`; null without Redis. */
  redis: RedisConnections | null;
  /** The job queue's backend and its queues: webhooks, e-mails (and the dialler's connection). */
  queues: Queues;
  providers: Providers;
  webhooks: WebhookService;
  /** The call sessions, with every call also written to the call log (`store.calls`). */
  callStore: LoggedCallStore;
  calls: CallService;
  /** Every carrier this process runs (src/telephony/registry.ts): their routes, transports and outbound carriers. */
  carriers: Carriers;
  /** The Twilio transport: voice webhook, outbound callbacks and media streams (`carriers`' own). */
  twilio: TwilioTelephony;
  /** The browser's transport: web calls (`POST /calls/web`, the stream). */
  web: WebTelephony;
  /** Listen-in: `POST /calls/{id}/listen` and its sockets, across processes with Redis (docs/listen.md). */
  listen: ListenHub;
  /** Direct SIP (DECISIONS 15): null unless started (`RuntimeOptions.sip`). */
  sip: SipTelephony | null;
  /** Outbound calls: queued, dialled within each organization's limits, ended through the API. */
  outbound: OutboundCalls;
  /** Word to the process that runs a call (live controls, `POST /calls/{id}/end`, answering-machine detection). */
  control: CallControl;
  /** The notification e-mails of answered calls (SMTP_URL); off without it. */
  emails: NotificationEmails;
  deliveries: DeliveryRepository;
  /** Deletes attempts older than WEBHOOK_DELIVERY_RETENTION_DAYS; stopped by `close`. */
  deliveryPruner: DeliveryPruner;
  /** Deletes e-mail attempts older than EMAIL_ATTEMPT_RETENTION_DAYS; stopped by `close`. */
  emailAttemptPruner: EmailAttemptPruner;
  /** Deletes calls older than CALL_RETENTION_DAYS from the call log; stopped by `close`. */
  callLogPruner: CallLogPruner;
  /** The background clips calls play (DECISIONS 13), loaded once per process. */
  background: BackgroundAudio;
  /** Where call recordings are kept: DATA_DIR/recordings, or RECORDINGS_S3_URL. */
  recordings: RecordingStore;
  /**
   * The providers' keys this server has: calls and chats that need a missing one are refused at
   * start. Unset when the runtime was given its providers (their keys are the giver's business).
   */
  keys: ProviderKeys | undefined;
  /** Deletes recordings older than RECORDING_RETENTION_DAYS; stopped by `close`. */
  recordingPruner: RecordingPruner;
  metrics: Metrics;
  /** Database writes kept while PostgreSQL does not answer (DECISIONS 22). */
  outbox: Outbox;
  /** Re-queues the notifications the delivery queue lost (DECISIONS 22). */
  reconciler: NotificationReconciler;
  /** Stops taking calls, lets live ones finish within `graceMs`, flushes webhooks. */
  close(graceMs?: number): Promise<void>;
}

export interface RuntimeOptions {
  config: Config;
  store: Store;
  logger: Logger;
  providers?: Providers;
  /** Twilio's REST API (tests point it at a fake by TWILIO_API_BASE instead). */
  twilioRest?: TwilioRest;
  /** The call sessions (default: Redis with REDIS_URL, else in process); the runtime adds the call log. */
  callStore?: CallStore;
  webhookQueueName?: string;
  /** The outbound dial queue's name (tests give each server its own). */
  dialQueueName?: string;
  /** When a media stream counts as gone (tests shorten it). */
  mediaLiveness?: Partial<MediaLiveness>;
  onTurnLatency?(latency: TurnLatency): void;
  /** When the pruner first runs and how often after that (tests shorten both). */
  deliveryPruning?: { firstRunAfterMs?: number; everyMs?: number; batchSize?: number };
  /** The same for the e-mail attempts' pruner. */
  emailAttemptPruning?: { firstRunAfterMs?: number; everyMs?: number; batchSize?: number };
  /** The same for the call log's pruner. */
  callLogPruning?: { firstRunAfterMs?: number; everyMs?: number; batchSize?: number };
  /** The e-mail queue's name (Redis), retry schedule and SMTP waits (tests shorten them). */
  emails?: Pick<NotificationEmailsOptions, 'queueName' | 'retryScheduleMs' | 'smtpTimeoutMs'>;
  /** Where recordings are kept (default: from the configuration). */
  recordings?: RecordingStore;
  /** When the recordings' pruner first runs and how often after that (tests shorten both). */
  recordingPruning?: { firstRunAfterMs?: number; everyMs?: number };
  /**
   * The SIP endpoint: on `port` (0: a free one) with the configuration's address and RTP ports.
   * Unset, none: the server's `main` starts it from SIP_PORT; tests that speak SIP ask for it.
   */
  sip?: {
    port: number;
    timers?: Partial<SipTimers>;
    /** A port in use turns SIP off with one warning instead of failing the start (SIP_PORT left at its default). */
    offWhenInUse?: boolean;
  };
  /** The outbox's flush period and bound (tests shorten the period). */
  outbox?: Pick<OutboxOptions, 'flushEveryMs' | 'maxEntries'>;
  /** When the reconciler counts a notification as lost, and how often it looks (tests shorten both). */
  reconciler?: Pick<ReconcilerOptions, 'graceMs' | 'everyMs' | 'firstRunAfterMs'>;
  /** How often the sweep of unfinished calls runs and the age it leaves alone (tests shorten both). */
  sweep?: { everyMs?: number; minAgeMs?: number };
}

export async function createRuntime(o: RuntimeOptions): Promise<Runtime> {
  // the one owner of the process's Redis connections, and the queue backend chosen once from it
  const redis = o.config.REDIS_URL ? new RedisConnections(o.config.REDIS_URL, o.logger.child({ component: 'redis' })) : null;
  const queues = createQueues({ redis });
  const providers = o.providers ?? createProviders(providerSettings(o.config));
  const deliveries = new DeliveryRepository(o.store.db);
  const notifications = new NotificationRepository(o.store.db);
  let calls: CallService | null = null;
  let outbox: Outbox | null = null;
  const metrics = new Metrics(() => calls?.liveCount() ?? 0, { outboxPending: () => outbox?.pending ?? 0 });
  // the database writes a call cannot lose, kept while PostgreSQL does not answer (DECISIONS 22)
  outbox = new Outbox({
    logger: o.logger,
    workerId: `o-${randomUUID()}`,
    redis,
    dataDir: o.config.DATA_DIR,
    onEvent: (event, kind) => metrics.outboxEvent(event, kind),
    ...o.outbox,
  });
  const kept = outbox;
  kept.register<DeliveryAttemptRecord>('attempt', (a) => deliveries.record(a));
  kept.register<Notification>('notification', (n) => notifications.insert(n));
  kept.register<string>('notification-done', (id) => notifications.done(id));
  const webhooks = new WebhookService({
    config: o.config,
    logger: o.logger.child({ component: 'webhooks' }),
    recorder: metrics.countingRecorder({
      record: async (attempt) => {
        await kept.submit('attempt', attempt.call_id, attempt);
        // a notification's last attempt: it leaves the durable record of what must be delivered
        if (attempt.outcome !== 'retrying' && NOTIFICATION_EVENTS.has(attempt.event)) {
          await kept.submit('notification-done', attempt.call_id, attempt.message_id);
        }
      },
    }),
    durable: { record: async (n) => void (await kept.submit('notification', n.call_id, n)) },
    queues,
    ...(o.webhookQueueName ? { queueName: o.webhookQueueName } : {}),
  });
  await webhooks.start();
  const reconciler = new NotificationReconciler({
    db: o.store.db,
    queue: webhooks.queue,
    logger: o.logger,
    onRequeued: (event) => metrics.webhookRequeued(event),
    ...o.reconciler,
  });
  const emails = new NotificationEmails({
    config: o.config,
    logger: o.logger.child({ component: 'emails' }),
    recorder: o.store.emailAttempts,
    queues,
    ...o.emails,
  });
  await emails.start();
  const callStore = new LoggedCallStore(o.callStore ?? createCallStore(redis), o.store.calls, o.logger, kept);
  const webhookNotifier = new WebhookCallNotifier(webhooks, o.store, providers, o.logger.child({ component: 'calls' }), kept);
  // every writer is registered: what a stopped process kept is written from here on
  await kept.start();
  reconciler.start();
  // every call ends with exactly one status-update `ended`: that is where calls are counted
  const notifier: CallNotifier = {
    statusUpdate: (call, status, extra) => {
      if (status === 'ended') metrics.callEnded(extra?.ended_reason ?? call.ended_reason ?? 'unknown');
      return webhookNotifier.statusUpdate(call, status, extra);
    },
    endOfCallReport: (call) => webhookNotifier.endOfCallReport(call),
    toolCalls: (call, requests, options) => webhookNotifier.toolCalls(call, requests, options),
  };
  const resolver: AssistantResolver = webhookNotifier;
  const control: CallControl = createCallControl(redis, o.logger.child({ component: 'calls' }));
  let outbound: OutboundCalls | null = null;
  const background = new BackgroundAudio({
    fetcher: webhooks.http,
    allowPrivate: o.config.WEBHOOK_ALLOW_PRIVATE,
    logger: o.logger.child({ component: 'background-audio' }),
  });
  const recordings = o.recordings ?? recordingStoreFromConfig(o.config);
  const keys = o.providers ? undefined : new ProviderKeys(providerSettings(o.config));
  const listen = new ListenHub({ log: o.logger, sessions: callStore, redis });
  await listen.start();
  calls = new CallService({
    listen,
    ...(keys ? { keys } : {}),
    media: { background, recordings, publicUrl: o.config.PUBLIC_URL },
    control,
    // every call ends here once, its report made: answered calls send their e-mails
    onCallEnded: (record) => {
      metrics.callObserved(record.observed);
      outbound?.callEnded(record);
      emails.callEnded(record);
    },
    store: o.store,
    calls: callStore,
    providers,
    notifier,
    resolver,
    logger: o.logger,
    onReplay: () => metrics.voiceWebhookReplayed(),
    onSwept: (record) => metrics.callSwept(record.ended_reason ?? 'unknown'),
    sharedSessions: !!o.config.REDIS_URL,
    onLostQueued: (logged) => outbound!.requeueLost(logged),
    ...(o.sweep?.everyMs ? { sweepEveryMs: o.sweep.everyMs } : {}),
    ...(o.sweep?.minAgeMs !== undefined ? { sweepMinAgeMs: o.sweep.minAgeMs } : {}),
    onTurnLatency: (latency) => {
      metrics.turn(latency);
      o.onTurnLatency?.(latency);
    },
  });
  const service = calls;
  await service.start();
  const watcher = new StreamWatcher({ ...DEFAULT_MEDIA_LIVENESS, ...o.mediaLiveness });
  // every declared carrier, each on what it needs of this process (src/telephony/registry.ts)
  const carriers = await Carriers.start({
    config: o.config,
    options: o,
    calls: service,
    callStore,
    store: o.store,
    logger: o.logger,
    publicUrl: o.config.PUBLIC_URL,
    watcher,
    liveness: watcher.liveness,
    metrics,
    onUnavailable: (carrier) => metrics.callRefusedUnavailable(carrier),
  });
  outbound = new OutboundCalls({
    store: o.store,
    calls: callStore,
    service,
    dialer: createDialer({
      db: o.store.db,
      logger: o.logger.child({ component: 'outbound' }),
      queues,
      ...(o.dialQueueName ? { queueName: o.dialQueueName } : {}),
    }),
    control,
    notifier,
    carriers: carriers.outbound(),
    logger: o.logger,
    onRequeued: () => metrics.dialRequeued(),
  });
  carriers.wire(outbound);
  await outbound.start();
  const outboundCalls = outbound;
  const deliveryPruner = new DeliveryPruner({
    deliveries,
    retentionDays: o.config.WEBHOOK_DELIVERY_RETENTION_DAYS,
    logger: o.logger.child({ component: 'webhooks' }),
    ...o.deliveryPruning,
  });
  deliveryPruner.start();
  const emailAttemptPruner = new EmailAttemptPruner({
    attempts: o.store.emailAttempts,
    retentionDays: o.config.EMAIL_ATTEMPT_RETENTION_DAYS,
    logger: o.logger.child({ component: 'emails' }),
    ...o.emailAttemptPruning,
  });
  emailAttemptPruner.start();
  const callLogPruner = new CallLogPruner({
    calls: o.store.calls,
    retentionDays: o.config.CALL_RETENTION_DAYS,
    logger: o.logger.child({ component: 'call-log' }),
    ...o.callLogPruning,
  });
  callLogPruner.start();
  const recordingPruner = new RecordingPruner({
    recordings,
    retentionDays: o.config.RECORDING_RETENTION_DAYS,
    logger: o.logger.child({ component: 'recordings' }),
    ...o.recordingPruning,
  });
  recordingPruner.start();
  let closing: Promise<void> | null = null;
  return {
    redis,
    queues,
    providers,
    webhooks,
    callStore,
    calls: service,
    carriers,
    twilio: carriers.instance(twilioCarrier)!,
    web: carriers.instance(webCarrier)!,
    sip: carriers.instance(sipCarrier),
    listen,
    outbound: outboundCalls,
    control,
    emails,
    deliveries,
    deliveryPruner,
    emailAttemptPruner,
    callLogPruner,
    background,
    recordings,
    recordingPruner,
    keys,
    metrics,
    outbox: kept,
    reconciler,
    close(graceMs = 0) {
      closing ??= (async () => {
        // first, so that a prune under way is over (after its current batch) before the database closes
        await reconciler.stop();
        await deliveryPruner.stop();
        await emailAttemptPruner.stop();
        await callLogPruner.stop();
        await recordingPruner.stop();
        // nothing more is dialled here (queued calls stay queued, durable, for the next process);
        // the dialler closes once the live calls have ended and given their slots back
        outboundCalls.stop();
        await service.shutdown(graceMs);
        await carriers.close();
        await outboundCalls.close();
        watcher.close();
        // the reports and e-mails of the calls just ended were queued: the in-process queues drop
        // what is still waiting when they close, so let them go first (bounded: main.ts exits 5 s past the grace)
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all([webhooks.queue.whenIdle(), emails.whenIdle()]),
          new Promise((r) => (timer = setTimeout(r, 4_000))),
        ]);
        clearTimeout(timer);
        // what the outbox kept is written now if the database answers, else left for the next start
        await kept.close();
        await webhooks.close();
        await emails.close();
        // lets the last call-log writes (the calls just ended) finish, then closes the sessions
        await callStore.close();
        await control.close();
        await listen.close();
        await recordings.close();
        // last: every module above has closed what it used
        await redis?.close();
      })();
      return closing;
    },
  };
}
