/**
 * Where an event goes (SPEC 6.3, DECISIONS 7). Pure.
 *
 * Levels, most specific first: tool `url` (tool-calls of that tool only) > assistant
 * `webhook_url` > number webhook > account webhook. The most specific level that has a URL is
 * chosen and its `events` list alone decides whether the event is sent: a level that has a URL
 * but does not list the event means "not sent", never "ask the next level". `assistant-request`
 * is only ever sent by the number or the account level (it is what picks the assistant).
 */
import type { WebhookEventType } from '../../engine/schema.js';

export type WebhookLevel = 'tool' | 'assistant' | 'number' | 'account';

export interface WebhookTarget {
  url: string;
  /** `null`: the request goes out unsigned (a number or account webhook without a secret). */
  secret: string | null;
  level: WebhookLevel;
}

/** `{url, secret, events}` of a number or of the account. */
export interface WebhookLevelSettings {
  url: string;
  secret: string | null;
  events: readonly string[];
}

export interface ResolveWebhookTargetInput {
  event: WebhookEventType;
  /** The tool being called (tool-calls only): its own `url`, when set, wins. */
  tool?: { url?: string | null | undefined } | null;
  /** The call's (effective) assistant. */
  assistant?: {
    webhook_url?: string | null | undefined;
    webhook_secret?: string | null | undefined;
    webhook_events?: readonly string[] | null | undefined;
  } | null;
  number?: { webhook?: WebhookLevelSettings | null | undefined } | null;
  account?: { webhook?: WebhookLevelSettings | null | undefined } | null;
}

/** All four types: what an assistant with a URL but no `webhook_events` receives. */
const ALL_EVENTS: readonly WebhookEventType[] = [
  'assistant-request',
  'tool-calls',
  'status-update',
  'end-of-call-report',
];

const present = (url: string | null | undefined): url is string => typeof url === 'string' && url !== '';
const secretOrNull = (s: string | null | undefined) => (present(s) ? s : null);

/** The one URL an event goes to, with the secret that signs it; `null` means "not sent". */
export function resolveWebhookTarget(input: ResolveWebhookTargetInput): WebhookTarget | null {
  const { event, tool, assistant } = input;
  const number = input.number?.webhook ?? null;
  const account = input.account?.webhook ?? null;

  const chosen = ((): { url: string; secret: string | null; events: readonly string[]; level: WebhookLevel } | null => {
    if (event !== 'assistant-request') {
      if (event === 'tool-calls' && present(tool?.url)) {
        // a tool URL always receives its tool's calls; it is signed with the nearest secret
        const secret =
          secretOrNull(assistant?.webhook_secret) ?? secretOrNull(number?.secret) ?? secretOrNull(account?.secret);
        return { url: tool.url, secret, events: ['tool-calls'], level: 'tool' };
      }
      if (present(assistant?.webhook_url)) {
        return {
          url: assistant.webhook_url,
          secret: secretOrNull(assistant.webhook_secret),
          events: assistant.webhook_events ?? ALL_EVENTS,
          level: 'assistant',
        };
      }
    }
    if (number && present(number.url)) {
      return { url: number.url, secret: secretOrNull(number.secret), events: number.events, level: 'number' };
    }
    if (account && present(account.url)) {
      return { url: account.url, secret: secretOrNull(account.secret), events: account.events, level: 'account' };
    }
    return null;
  })();

  if (!chosen || !chosen.events.includes(event)) return null;
  return { url: chosen.url, secret: chosen.secret, level: chosen.level };
}
