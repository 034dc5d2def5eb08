/** Bearer API keys (DECISIONS 2): every API route except health needs one. */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Organization } from '../store/keys.js';
import type { KeyRepository } from '../store/keys.js';
import { invalidApiKey } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    organization: Organization;
    /** The id of the API key the request came with (GET /keys marks it). */
    apiKeyId: string;
  }
}

const BEARER = /^Bearer[ ]+(\S+)\s*$/i;

export function registerAuth(app: FastifyInstance, keys: KeyRepository): void {
  app.decorateRequest('organization', null as unknown as Organization);
  app.decorateRequest('apiKeyId', '');
  app.addHook('onRequest', async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    if (header === undefined) {
      throw invalidApiKey('Send your API key as "Authorization: Bearer sk_live_...".');
    }
    const match = BEARER.exec(header);
    if (!match) {
      throw invalidApiKey('The Authorization header must be "Bearer <API key>".');
    }
    const found = await keys.identify(match[1]!);
    if (!found) {
      throw invalidApiKey('The API key is not valid: it is unknown, revoked or malformed.');
    }
    request.organization = found.organization;
    request.apiKeyId = found.keyId;
  });
}
