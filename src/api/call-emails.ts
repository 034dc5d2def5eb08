/**
 * `GET /calls/{id}/emails`: every attempt at the notification e-mails of a call (recipient, the
 * SMTP server's reply, attempt number, next retry), so that customers can see whether and when
 * they went out. Nothing of the message is kept or shown. Not registered here: the app registers
 * it inside its authenticated scope.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { EmailAttemptRepository } from '../store/email-attempts.js';
import { notFound } from './errors.js';
import { errorResponses, IdParams } from './schemas.js';
import type { CallWebhookRoutesOptions } from './call-webhooks.js';

const emailAttemptExample = {
  id: '412',
  email_id: 'eml_Qm9va2luZ0NvbmZpcm1lZEEx',
  recipient: 'frontdesk@acme-dental.example',
  attempt: 1,
  outcome: 'retrying',
  smtp_code: 451,
  smtp_response: '451 4.7.1 Greylisted, please try again later',
  error: 'the SMTP server refused for now at RCPT (451)',
  duration_ms: 84,
  next_retry_at: '2025-06-02T09:16:41.120Z',
  created_at: '2025-06-02T09:16:11.036Z',
};

export const EmailAttempt = z
  .object({
    id: z.string(),
    email_id: z.string().describe('the same on every attempt at one e-mail (one recipient of the call)'),
    recipient: z.string(),
    attempt: z.number().int().describe('1 for the first attempt'),
    outcome: z
      .enum(['sent', 'retrying', 'failed', 'gave-up'])
      .describe('sent: the SMTP server took it; retrying: another attempt is scheduled; failed: refused for good (5xx); gave-up: retries used up'),
    smtp_code: z.number().int().nullable().describe('the SMTP reply code; null when no reply came (connection refused, timeout)'),
    smtp_response: z.string().nullable().describe("the SMTP server's reply as it gave it"),
    error: z.string().nullable().describe('why it was not sent, in a short phrase (no network detail)'),
    duration_ms: z.number().int(),
    next_retry_at: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'EmailAttempt', example: emailAttemptExample });

export const callEmailRoutes =
  (attempts: EmailAttemptRepository, options: CallWebhookRoutesOptions = {}): FastifyPluginAsyncZod =>
  async (app) => {
    app.get('/calls/:id/emails', {
      schema: {
        operationId: 'listCallEmails',
        tags: ['calls'],
        summary: 'The notification e-mail attempts of a call, oldest first',
        description:
          "After an answered call, one e-mail goes to each of its assistant's notification_email and notification_emails " +
          '(SMTP_URL). Each attempt is listed: its recipient, how the SMTP server answered, and when the next retry is due. ' +
          'Empty when the call was not answered, its assistant has no address, or SMTP_URL is not set.',
        params: IdParams,
        response: {
          200: z.object({ emails: z.array(EmailAttempt) }).meta({ example: { emails: [emailAttemptExample] } }),
          ...errorResponses,
        },
      },
      handler: async (request) => {
        const orgId = request.organization.id;
        const callId = request.params.id;
        if (options.callExists && !(await options.callExists(orgId, callId))) throw notFound('call', callId);
        // the attempt as recorded, less what the path already says
        const emails = (await attempts.listForCall(orgId, callId)).map(({ organization_id: _org, call_id: _call, ...attempt }) => attempt);
        return { emails };
      },
    });
  };
