/** The platform catalog that validation uses (DECISIONS 4). */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { BACKGROUND_CLIPS, defaultCatalog, type ProviderKind } from '../../engine/catalog.js';
import { errorResponses } from './schemas.js';

const KINDS: ProviderKind[] = ['llm', 'realtime', 'stt', 'tts'];

const CatalogProvider = z.object({
  id: z.string(),
  description: z.string(),
  models: z.array(z.string()).nullable().describe('null: any model name is accepted'),
  default_model: z.string().nullable(),
  languages: z.record(z.string(), z.array(z.string())).nullable().optional(),
  default_language: z.string().optional(),
  voices: z.array(z.string()).nullable().optional().describe('null: voices are not enumerated'),
  default_voice: z.string().optional(),
  requires_url: z.boolean().optional(),
});

const BackgroundClip = z.object({
  id: z.string().describe('the value of speech_config.background_audio.clip'),
  description: z.string(),
});

const catalogView = {
  ...Object.fromEntries(
    KINDS.map((kind) => [
      kind,
      defaultCatalog.providers.filter((p) => p.kind === kind).map(({ kind: _kind, ...p }) => p),
    ]),
  ),
  background_clips: BACKGROUND_CLIPS.map((c) => ({ ...c })),
};

export const catalogRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get('/catalog', {
    schema: {
      operationId: 'getCatalog',
      tags: ['catalog'],
      summary: 'Providers, models, languages and voices by kind (llm, realtime, stt, tts), and the background clips',
      description:
        'What validation accepts. `background_clips` are the clips shipped with Switchboard for ' +
        '`speech_config.background_audio.clip`; an https URL of a WAV file (at most 10 MB) is accepted too.',
      response: {
        200: z.object({
          catalog: z.object({
            ...Object.fromEntries(KINDS.map((k) => [k, z.array(CatalogProvider)])),
            background_clips: z.array(BackgroundClip),
          }),
        }),
        ...errorResponses,
      },
    },
    handler: async () => ({ catalog: catalogView }),
  });
};
