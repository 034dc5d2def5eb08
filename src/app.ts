/** Assembles the Fastify app from the rooms: API routes, auth, errors, OpenAPI. */
import { tracingEnabled } from './observability/tracing.js';
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import fastifyRateLimit from '@fastify/rate-limit';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Store } from './store/index.js';
import { registerAuth } from './api/auth.js';
import {
  ApiError,
  clientErrorHandler,
  frameworkErrors,
  invalidRequest,
  registerErrorHandler,
  RequestValidationError,
} from './api/errors.js';
import { nonFiniteNumberDetails } from './api/storable.js';
import { workflowRoutes } from './api/workflows.js';
import { assistantRoutes } from './api/assistants.js';
import { numberRoutes } from './api/numbers.js';
import { accountRoutes } from './api/account.js';
import { catalogRoutes } from './api/catalog.js';
import { keyRoutes } from './api/keys.js';
import { VERSION } from './version.js';
import { apiServers, openApiTransform, openApiTransformObject } from './api/openapi.js';
import type { Runtime } from './runtime.js';
import { callRoutes } from './api/calls.js';
import { callControlRoutes } from './api/call-control.js';
import { chatRoutes } from './api/chats.js';
import { createChatStore } from './chats/store.js';
import { testSuiteRoutes } from './api/test-suites.js';
import { createSuiteRunner } from './suites/index.js';
import { callWebhookRoutes } from './api/call-webhooks.js';
import { callEmailRoutes } from './api/call-emails.js';
import { callRecordingRoutes } from './api/call-recording.js';
import { BackgroundAudio } from './audio/background.js';
import { ProviderKeys } from './providers/keys.js';
import { providerSettings } from './providers/index.js';
import { consoleRoutes } from './api/console.js';
import { callListenRoutes } from './api/call-listen.js';
import { upgradeRoute } from './telephony/upgrades.js';
import { LISTEN_PATH, ListenSockets } from './telephony/listen-socket.js';

export interface AppOptions {
  config: Config;
  store: Store;
  logger: Logger;
  /** Live calls (telephony endpoints, media sockets, /calls); without it, the API alone. */
  runtime?: Runtime;
}

export const BODY_LIMIT = 1024 * 1024;

/** What the API document (and /docs) says first: every resource, and what needs no key. */
const API_DESCRIPTION = [
  'The API of a Switchboard deployment: AI voice assistants on phone calls, web calls and chats.',
  '',
  '- **workflows**: the conversations, as graphs of nodes and edges (validated on write), with the layout the dashboard draws them in',
  '- **assistants**: the model, voice and transcriber, and how calls behave',
  '- **numbers**: phone numbers (Twilio or a SIP trunk) and what answers them',
  '- **account**: the webhook, Twilio, the SIP trunk and outbound limits of the organization',
  '- **keys**: the organization\'s API keys (a new key is shown once)',
  '- **calls**: outbound calls and campaigns, web calls, the call log with its stats, each call\'s recording, webhook and e-mail attempts',
  '- **chats**: text conversations that run a workflow as a call would',
  '- **catalog**: the providers, models, languages, voices and background clips validation accepts',
  '- **health**: liveness, readiness and Prometheus metrics',
  '',
  'Every endpoint needs `Authorization: Bearer <API key>` except `/healthz`, `/readyz` and `/metrics` ' +
    '(scrape it from inside your network), this document (`/openapi.json`, `/docs`) and the dashboard\'s page (`/console`). ' +
    'Errors are `{"error", "message"?, "details"?}`, each detail starting with the field it is about.',
].join('\n');

const API_TAGS = [
  { name: 'workflows', description: 'Graphs of conversation, tool, transfer and end nodes (DECISIONS 3)' },
  { name: 'assistants', description: 'Model, voice, transcriber and call behaviour (DECISIONS 5)' },
  { name: 'numbers', description: 'Phone numbers and what answers them (DECISIONS 6)' },
  { name: 'account', description: 'Webhook, Twilio, SIP trunk, outbound limits (DECISIONS 6, 11, 15)' },
  { name: 'keys', description: "The organization's API keys (DECISIONS 19)" },
  { name: 'calls', description: 'Outbound and web calls, the call log, recordings, delivery attempts (DECISIONS 8, 11, 14)' },
  { name: 'chats', description: 'Text conversations against a workflow (DECISIONS 14)' },
  { name: 'catalog', description: 'What validation accepts (DECISIONS 4)' },
  { name: 'health', description: 'Liveness, readiness, metrics: no key' },
];

export async function buildApp({ config, store, logger, runtime }: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT,
    genReqId: () => randomUUID(),
    routerOptions: { ignoreTrailingSlash: true },
    frameworkErrors,
    clientErrorHandler,
  }).withTypeProvider<ZodTypeProvider>();

  // JSON is the one body type of the API: text/plain is refused like any other type (400), not
  // read as a string. A number beyond a double (`1e400`) is refused, not read as Infinity.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    parseJson(request, body as string, (err, value) => {
      if (err) return done(err, undefined);
      const details = nonFiniteNumberDetails(value);
      if (details.length > 0) return done(invalidRequest(details), undefined);
      done(null, value);
    });
  });

  app.setValidatorCompiler<z.ZodType>(({ schema, httpPart }) => (data) => {
    const result = schema.safeParse(data);
    return result.success
      ? { value: result.data }
      : { error: new RequestValidationError(httpPart ?? 'body', result.error.issues) };
  });
  // responses are built by our own code from typed values: no second validation on the way out
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  registerErrorHandler(app);
  // with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT), each API request is an HTTP span; health
  // checks and /metrics are left out (a scraper's every call would be a trace)
  if (tracingEnabled()) {
    const { FastifyOtelInstrumentation } = await import('@fastify/otel');
    const otel = new FastifyOtelInstrumentation({
      instrumentHooks: false,
      ignorePaths: ({ url }) => url === '/healthz' || url === '/readyz' || url === '/metrics',
    });
    await app.register(otel.plugin());
  }

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Switchboard API',
        version: VERSION,
        description: API_DESCRIPTION,
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
      },
      servers: apiServers(config),
      components: {
        securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'sk_live_...' } },
      },
      security: [{ apiKey: [] }],
      tags: API_TAGS,
    },
    transform: openApiTransform,
    transformObject: openApiTransformObject,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs', theme: { title: 'Switchboard API' } });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/healthz', { schema: { operationId: 'checkLiveness', tags: ['health'], summary: 'Liveness', security: [] } }, async () => ({
    status: 'ok',
  }));
  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'checkReadiness',
        tags: ['health'],
        summary: 'Readiness: the database answers, and the process takes new calls',
        description:
          '503 while the database does not answer, and from the moment the process starts draining (SIGTERM: no new calls, ' +
          'the live ones finish within SHUTDOWN_GRACE_SECONDS), so that a load balancer sends new work elsewhere (docs/deploy.md).',
        security: [],
      },
    },
    async (request, reply) => {
      if (runtime && !runtime.calls.isAccepting()) {
        return reply.code(503).send({ error: 'Not ready', message: 'Draining: this process takes no new calls; its live calls are finishing.' });
      }
      try {
        await store.db.query('SELECT 1');
        return { status: 'ready', database: store.db.kind };
      } catch (err) {
        request.log.warn({ err }, 'database not reachable');
        return reply.code(503).send({ error: 'Not ready', message: 'The database does not answer.' });
      }
    },
  );

  await app.register(async (api) => {
    registerAuth(api, store.keys);
    if (config.RATE_LIMIT_PER_MINUTE > 0) {
      await api.register(fastifyRateLimit, {
        hook: 'preHandler',
        max: config.RATE_LIMIT_PER_MINUTE,
        timeWindow: 60_000,
        keyGenerator: (request) => request.organization?.id ?? request.ip,
        errorResponseBuilder: (_request, context) =>
          new ApiError(
            429,
            'Too many requests',
            `Over ${context.max} requests per minute for this organization; retry in ${Math.ceil(context.ttl / 1000)} s.`,
          ),
      });
    }
    await api.register(workflowRoutes(store));
    await api.register(
      assistantRoutes(store, {
        background: runtime?.background ?? new BackgroundAudio({ fetcher: null, allowPrivate: config.WEBHOOK_ALLOW_PRIVATE }),
        // the runtime's when it runs calls (none when it was given its own providers), else the configuration's
        ...(runtime ? (runtime.keys ? { keys: runtime.keys } : {}) : { keys: new ProviderKeys(providerSettings(config)) }),
      }),
    );
    await api.register(numberRoutes(store));
    await api.register(accountRoutes(store));
    await api.register(catalogRoutes);
    await api.register(keyRoutes(store.keys));
    if (runtime) {
      await api.register(callRoutes(runtime.callStore, runtime.outbound, { calls: runtime.calls, publicUrl: config.PUBLIC_URL }));
      await api.register(callControlRoutes({ calls: runtime.callStore, control: runtime.control, sharedSessions: !!config.REDIS_URL }));
      // one chat store: test suites keep their test chats beside the chats (closed with the chats' routes)
      const chats = createChatStore(runtime.redis);
      await api.register(
        chatRoutes({
          store,
          providers: runtime.providers,
          webhooks: runtime.webhooks,
          logger,
          chats,
          ...(runtime.keys ? { keys: runtime.keys } : {}),
        }),
      );
      await api.register(testSuiteRoutes({ store, runner: createSuiteRunner({ store, runtime, chats, logger }) }));
      const callExists = async (orgId: string, callId: string) =>
        (await runtime.callStore.get(callId))?.organization_id === orgId || (await store.calls.get(orgId, callId)) !== null;
      await api.register(callWebhookRoutes(runtime.deliveries, { callExists }));
      await api.register(callEmailRoutes(store.emailAttempts, { callExists }));
      await api.register(callRecordingRoutes(runtime.recordings, { callExists }));
      await api.register(callListenRoutes({ sessions: runtime.callStore, callExists, hub: runtime.listen, publicUrl: config.PUBLIC_URL }));
    }
  });

  // the console is a page that calls the API with the key it is given: it needs no runtime of its own
  await app.register(consoleRoutes);

  if (runtime) {
    // every carrier's webhooks and media sockets (src/telephony/registry.ts)
    await runtime.carriers.routes(app);
    const listeners = new ListenSockets({ hub: runtime.listen, logger, isAccepting: () => runtime.calls.isAccepting() });
    upgradeRoute(app, LISTEN_PATH, (request, socket, head) => listeners.upgrade(request, socket, head));
    app.addHook('onClose', async () => listeners.close());
    app.get(
      '/metrics',
      { schema: { operationId: 'getMetrics', tags: ['health'], summary: 'Prometheus metrics (no key: scrape it from inside your network)', security: [] } },
      async (_request, reply) => reply.header('content-type', runtime.metrics.contentType).send(await runtime.metrics.render()),
    );
  }

  return app;
}
