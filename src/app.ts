/** Assembles the Fastify app from the rooms: API routes, auth, errors, OpenAPI. */
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
import { VERSION } from './version.js';
import { apiServers, openApiTransform, openApiTransformObject } from './api/openapi.js';
import type { Runtime } from './runtime.js';
import { twilioRoutes } from './telephony/twilio/routes.js';
import { upgradeRoute } from './telephony/upgrades.js';
import { WEB_STREAM_PATH } from './telephony/web/transport.js';
import { callRoutes } from './api/calls.js';
import { chatRoutes } from './api/chats.js';
import { callWebhookRoutes } from './api/call-webhooks.js';
import { callEmailRoutes } from './api/call-emails.js';
import { callRecordingRoutes } from './api/call-recording.js';
import { BackgroundAudio } from './audio/background.js';
import { ProviderKeys } from './providers/keys.js';
import { providerSettings } from './providers/index.js';
import { consoleRoutes } from './api/console.js';

export interface AppOptions {
  config: Config;
  store: Store;
  logger: Logger;
  /** Live calls (telephony endpoints, media sockets, /calls); without it, the API alone. */
  runtime?: Runtime;
}

export const BODY_LIMIT = 1024 * 1024;

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

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Switchboard API',
        version: VERSION,
        description:
          'Workflows, assistants, numbers and account settings of a Switchboard deployment. ' +
          'Every endpoint except /healthz and /readyz needs `Authorization: Bearer <API key>`.',
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
      },
      servers: apiServers(config),
      components: {
        securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'sk_live_...' } },
      },
      security: [{ apiKey: [] }],
    },
    transform: openApiTransform,
    transformObject: openApiTransformObject,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/healthz', { schema: { operationId: 'checkLiveness', tags: ['health'], summary: 'Liveness', security: [] } }, async () => ({
    status: 'ok',
  }));
  app.get(
    '/readyz',
    { schema: { operationId: 'checkReadiness', tags: ['health'], summary: 'Readiness: the database answers', security: [] } },
    async (request, reply) => {
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
    if (runtime) {
      await api.register(callRoutes(runtime.callStore, runtime.outbound, { calls: runtime.calls, publicUrl: config.PUBLIC_URL }));
      await api.register(
        chatRoutes({
          store,
          providers: runtime.providers,
          webhooks: runtime.webhooks,
          logger,
          redisUrl: config.REDIS_URL,
          ...(runtime.keys ? { keys: runtime.keys } : {}),
        }),
      );
      const callExists = async (orgId: string, callId: string) =>
        (await runtime.callStore.get(callId))?.organization_id === orgId || (await store.calls.get(orgId, callId)) !== null;
      await api.register(callWebhookRoutes(runtime.deliveries, { callExists }));
      await api.register(callEmailRoutes(store.emailAttempts, { callExists }));
      await api.register(callRecordingRoutes(runtime.recordings, { callExists }));
    }
  });

  // the console is a page that calls the API with the key it is given: it needs no runtime of its own
  await app.register(consoleRoutes);

  if (runtime) {
    await twilioRoutes(app, { twilio: runtime.twilio, publicUrl: config.PUBLIC_URL });
    upgradeRoute(app, WEB_STREAM_PATH, (request, socket, head) => runtime.web.upgrade(request, socket, head));
    app.get(
      '/metrics',
      { schema: { operationId: 'getMetrics', tags: ['health'], summary: 'Prometheus metrics (no key: scrape it from inside your network)', security: [] } },
      async (_request, reply) => reply.header('content-type', runtime.metrics.contentType).send(await runtime.metrics.render()),
    );
  }

  return app;
}
