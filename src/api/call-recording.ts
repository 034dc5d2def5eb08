/**
 * `GET /calls/{id}/recording`: the recording of a call, one stereo WAV streamed from where it is
 * kept (src/recordings/storage.ts), never read into memory. The end-of-call-report's
 * `recording_url` is this path. Not registered here: the app registers it inside its
 * authenticated scope.
 */
import { z } from 'zod';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { recordingKey, type RecordingStore } from '../recordings/storage.js';
import { ApiError, notFound } from './errors.js';
import { errorResponses, IdParams } from './schemas.js';
import type { CallWebhookRoutesOptions } from './call-webhooks.js';

/** A call that is known but has no recording, in plain words. */
export const noRecording = (callId: string) =>
  new ApiError(
    404,
    'Not found',
    `The call ${JSON.stringify(callId)} has no recording: it was not recorded, it is still in progress, ` +
      'or its recording was deleted after RECORDING_RETENTION_DAYS.',
  );

/**
 * The route. With `options.callExists` (as the app gives it), a call that is unknown or another
 * organization's is "No call with id …", like the other /calls/{id}/… routes; without it, every
 * call without a recording of the caller's organization is `noRecording`. Recordings are kept per
 * organization (`<org>/<call>.wav`), so another organization's recording is never found either way.
 */
export const callRecordingRoutes =
  (recordings: RecordingStore, options: CallWebhookRoutesOptions = {}): FastifyPluginAsyncZod =>
  async (app) => {
    /** The recording's headers, then its bytes unless `head`; 404s as the other call routes. */
    const answer = async (orgId: string, callId: string, reply: FastifyReply, head: boolean) => {
      if (options.callExists && !(await options.callExists(orgId, callId))) throw notFound('call', callId);
      const recording = await recordings.open(recordingKey(orgId, callId));
      if (!recording) throw noRecording(callId);
      void reply.headers({
        'content-type': 'audio/wav',
        'content-length': String(recording.size),
        'content-disposition': `attachment; filename="${callId}.wav"`,
      });
      if (head) {
        recording.stream.destroy();
        return reply.send();
      }
      // Fastify pipes the stream, and destroys it if the client goes away first
      return reply.send(recording.stream);
    };

    app.get('/calls/:id/recording', {
      // Fastify's own HEAD route would read the whole recording (from S3: download it) only to
      // throw the bytes away: the one below opens it and reads nothing
      exposeHeadRoute: false,
      schema: {
        operationId: 'getCallRecording',
        tags: ['calls'],
        summary: 'The recording of a call, as a stereo WAV file',
        description:
          'One WAV file, 8 kHz 16-bit PCM, two channels: left the customer, right what the customer heard of the assistant. ' +
          'Streamed as an attachment named after the call. ' +
          '404 when the call has none: it was not recorded, it is still in progress, or its recording was deleted after RECORDING_RETENTION_DAYS days. ' +
          "The end-of-call-report's recording_url is this path, or null when the call has no recording.",
        params: IdParams,
        response: {
          200: {
            description: 'The recording (Content-Length set; Content-Disposition: attachment; filename="<call id>.wav")',
            content: { 'audio/wav': { schema: z.any().meta({ type: 'string', format: 'binary' }) } },
          },
          ...errorResponses,
        },
      },
      handler: (request, reply) => answer(request.organization.id, request.params.id, reply, false),
    });

    // the headers alone (size, name); not in the OpenAPI document, like every HEAD of the API
    app.head('/calls/:id/recording', {
      schema: { hide: true, params: IdParams },
      handler: (request, reply) => answer(request.organization.id, request.params.id, reply, true),
    });
  };
