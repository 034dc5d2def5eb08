/**
 * Chats (DECISIONS 14): `POST /chats`, `POST /chats/{id}/messages`, `GET /chats/{id}`,
 * `GET /chats`. A text conversation with an assistant running its workflow as a call would, with
 * no audio (docs/chats.md). The plugin owns its chat service and store, and closes them with the app.
 */
import type { ProviderKeys } from '../providers/keys.js';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { Store } from '../store/index.js';
import type { Providers } from '../providers/types.js';
import type { WebhookService } from '../webhooks/service.js';
import { ChatError, ChatService } from '../chats/service.js';
import { createChatStore, type ChatRecord, type ChatStore } from '../chats/store.js';
import { ApiError, invalidRequest } from './errors.js';
import { CallErrorEntry, ErrorBody, errorResponses, IdParams } from './schemas.js';
import { storable } from './storable.js';
import { wellFormed } from '../../engine/text.js';
import { Variables, VariableValue } from './variables.js';
import { chatCreateExample, chatExample, chatMessageExample } from './examples.js';

export interface ChatRouteDeps {
  store: Store;
  providers: Providers;
  webhooks: Pick<WebhookService, 'callTools' | 'sendAsyncToolCalls'>;
  logger: Logger;
  /** Chats in Redis when set (keys `sb:chat:…`), else in process. */
  redisUrl?: string | undefined;
  /** The chat store (default: from `redisUrl`); closed with the app. */
  chats?: ChatStore;
  /** The providers' keys this server has (a chat whose model needs a missing one is refused). */
  keys?: ProviderKeys;
}

export const ChatCreateBody = storable(
  z.strictObject({
    assistant_id: z.uuid(),
    workflow_id: z.uuid().nullable().optional().describe('absent or null: the assistant alone, as a number without a workflow'),
    variables: Variables.optional(),
  }),
).meta({ example: chatCreateExample });

export const ChatMessageBody = storable(
  z.strictObject({
    text: wellFormed()
      .min(1)
      .max(4_000)
      .refine((t) => t.trim() !== '', 'must not be blank')
      .describe("the customer's message, 1 to 4,000 characters"),
  }),
).meta({ example: chatMessageExample });

const Timestamp = z.string().describe('ISO 8601 UTC timestamp');

const ChatMessage = z.object({
  role: z.enum(['assistant', 'user', 'tool']),
  content: z.string().describe("a tool message: the tool's result as the model reads it (JSON unless a string), or {\"error\": …}"),
  node_id: z.string().nullable(),
  time: Timestamp,
  tool_name: z.string().optional().describe('tool messages: the tool that answered'),
});

export const Chat = z.object({
  id: z.uuid(),
  type: z.enum(['chat', 'test_chat']).describe('test_chat: a chat a test suite ran (docs/test-suites.md)'),
  status: z.enum(['active', 'ended']),
  assistant_id: z.uuid(),
  workflow_id: z.uuid().nullable().describe('null when no workflow runs (none named, or the one named is inactive)'),
  workflow_note: z.string().nullable().describe('why the workflow named does not run, when it does not'),
  node_id: z.string().nullable().describe('the current node ("assistant" when the assistant runs alone)'),
  nodes_visited: z.array(z.string()),
  ended_reason: z
    .string()
    .nullable()
    .describe('assistant-ended-call (end node), call-transferred (transfer node), pipeline-error-<provider> (the model failed)'),
  errors: z.array(CallErrorEntry).describe('what went wrong, when the chat ended pipeline-error-<provider>'),
  variables: z.record(z.string(), VariableValue).describe('the variables given at the start, as given (substituted into the assistant and workflow: docs/variables.md)'),
  messages: z.array(ChatMessage).describe('empty once a gdpr_mode chat has ended'),
  created_at: Timestamp,
  updated_at: Timestamp,
}).meta({ id: 'Chat', example: chatExample });

const Reply = z
  .array(z.object({ role: z.literal('assistant'), content: z.string(), node_id: z.string().nullable() }))
  .describe("the assistant's messages of this turn, in order");

export function chatView(c: ChatRecord): z.infer<typeof Chat> {
  return {
    id: c.id,
    type: c.type ?? 'chat',
    status: c.status,
    assistant_id: c.assistant_id,
    workflow_id: c.workflow_id,
    workflow_note: c.workflow_note,
    node_id: c.node_id,
    nodes_visited: c.nodes_visited,
    ended_reason: c.ended_reason,
    errors: c.errors,
    variables: c.variables,
    messages: c.messages,
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}

function toApiError(err: unknown): unknown {
  if (!(err instanceof ChatError)) return err;
  switch (err.code) {
    case 'CHAT_UNKNOWN_REFERENCE':
      return invalidRequest(err.details);
    case 'CHAT_REJECTED':
      return new ApiError(400, 'Chat rejected', err.message, err.details);
    case 'CHAT_NOT_FOUND':
      return new ApiError(404, 'Not found', err.message);
    case 'CHAT_ENDED':
      return new ApiError(409, 'Chat ended', err.message);
    case 'CHAT_BUSY':
      return new ApiError(409, 'Chat busy', err.message);
  }
}

const answering = async <T>(work: () => Promise<T>): Promise<T> => {
  try {
    return await work();
  } catch (err) {
    throw toApiError(err);
  }
};

export const chatRoutes =
  (deps: ChatRouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const chats = new ChatService({
      store: deps.store,
      providers: deps.providers,
      webhooks: deps.webhooks,
      logger: deps.logger,
      chats: deps.chats ?? createChatStore(deps.redisUrl),
      ...(deps.keys ? { keys: deps.keys } : {}),
    });
    app.addHook('onClose', async () => chats.close());
    const tags = ['chats'];
    const one = z.object({ chat: Chat });

    app.post('/chats', {
      schema: {
        operationId: 'createChat',
        tags,
        summary: 'Start a text chat with an assistant, running its workflow as a call would',
        description:
          'The opening lines (first message, entry node) are in `messages` already. An unknown assistant or workflow is a 400 ' +
          '`Invalid request`; an assistant and workflow that a call would refuse at start are a 400 `Chat rejected` with every reason.',
        body: ChatCreateBody,
        response: { 201: one, ...errorResponses },
      },
      handler: async (request, reply) => {
        const { chat } = await answering(() => chats.start(request.organization.id, request.body));
        return reply.code(201).send({ chat: chatView(chat) });
      },
    });

    app.post('/chats/:id/messages', {
      schema: {
        operationId: 'sendChatMessage',
        tags,
        summary: "The customer's message; answers once the assistant has finished its turn",
        description:
          'The turn runs as in a call: transitions with their edge messages and first lines, tool nodes with their `tool-calls` ' +
          'exchange, the model and its tools. An end node ends the chat `assistant-ended-call`, a transfer node `call-transferred` ' +
          '(nothing is dialled). 409 `Chat ended` once it has ended; 409 `Chat busy` while the previous message is being answered.',
        params: IdParams,
        body: ChatMessageBody,
        response: { 200: z.object({ chat: Chat, reply: Reply }), 409: ErrorBody.describe('Chat ended, or Chat busy'), ...errorResponses },
      },
      handler: async (request) => {
        const { chat, reply } = await answering(() => chats.message(request.organization.id, request.params.id, request.body.text));
        return { chat: chatView(chat), reply };
      },
    });

    app.get('/chats/:id', {
      schema: { operationId: 'getChat', tags, summary: 'One chat (kept 24 h after its last message)', params: IdParams, response: { 200: one, ...errorResponses } },
      handler: async (request) => {
        const chat = await answering(() => chats.get(request.organization.id, request.params.id));
        return { chat: chatView(chat) };
      },
    });

    app.get('/chats', {
      schema: {
        operationId: 'listChats',
        tags,
        summary: "The organization's chats of the last 24 h, newest first",
        querystring: z.strictObject({ limit: z.coerce.number().int().min(1).max(100).default(50).describe('chats listed, 1 to 100') }),
        response: { 200: z.object({ chats: z.array(Chat) }), ...errorResponses },
      },
      handler: async (request) => {
        const list = await chats.list(request.organization.id, request.query.limit);
        return { chats: list.map(chatView) };
      },
    });
  };
