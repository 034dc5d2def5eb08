import { describe, expect, it } from 'vitest';
import type { WebhookEventType } from '../../engine/schema.js';
import { resolveWebhookTarget, type ResolveWebhookTargetInput } from '../../src/webhooks/target.js';

const ALL = ['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report'];
const tool = { url: 'https://tool.example/run' };
const toolWithoutUrl = { url: undefined };
const assistant = { webhook_url: 'https://assistant.example/hook', webhook_secret: 'whsec_A', webhook_events: ALL };
const assistantNoUrl = { webhook_url: null, webhook_secret: 'whsec_unused', webhook_events: ALL };
const assistantOnlyReport = { ...assistant, webhook_events: ['end-of-call-report'] };
const assistantDefaultEvents = { webhook_url: 'https://assistant.example/hook', webhook_secret: null };
const number = { webhook: { url: 'https://number.example/hook', secret: 'whsec_N', events: ALL } };
const numberNoSecret = { webhook: { url: 'https://number.example/hook', secret: null, events: ALL } };
const numberOnlyStatus = { webhook: { url: 'https://number.example/hook', secret: 'whsec_N', events: ['status-update'] } };
const numberNone = { webhook: null };
const account = { webhook: { url: 'https://account.example/hook', secret: 'whsec_O', events: ALL } };
const accountNoRequest = { webhook: { ...account.webhook, events: ['status-update', 'end-of-call-report', 'tool-calls'] } };

type Row = [
  name: string,
  event: WebhookEventType,
  levels: Omit<ResolveWebhookTargetInput, 'event'>,
  expected: { url: string; secret: string | null; level: string } | null,
];

const A = { url: assistant.webhook_url, secret: 'whsec_A', level: 'assistant' };
const N = { url: number.webhook.url, secret: 'whsec_N', level: 'number' };
const O = { url: account.webhook.url, secret: 'whsec_O', level: 'account' };
const T = (secret: string | null) => ({ url: tool.url, secret, level: 'tool' });

const rows: Row[] = [
  // tool-calls: tool url > assistant > number > account
  ['tool url wins over every level', 'tool-calls', { tool, assistant, number, account }, T('whsec_A')],
  ['tool url is signed with the number secret without an assistant secret', 'tool-calls', { tool, assistant: { webhook_url: null }, number, account }, T('whsec_N')],
  ['tool url is signed with the account secret as a last resort', 'tool-calls', { tool, number: numberNone, account }, T('whsec_O')],
  ['tool url with no secret anywhere goes unsigned', 'tool-calls', { tool }, T(null)],
  ['tool url is used even when the assistant does not list tool-calls', 'tool-calls', { tool, assistant: assistantOnlyReport }, T('whsec_A')],
  ['a tool without url falls to the assistant', 'tool-calls', { tool: toolWithoutUrl, assistant, number, account }, A],
  ['a tool without url, assistant without url: number', 'tool-calls', { tool: toolWithoutUrl, assistant: assistantNoUrl, number, account }, N],
  ['a tool without url, nothing but the account', 'tool-calls', { tool: toolWithoutUrl, account }, O],
  ['tool url does not apply to other events', 'status-update', { tool, assistant, number, account }, A],
  // assistant level
  ['assistant url wins over number and account', 'status-update', { assistant, number, account }, A],
  ['assistant events decide: not listed means not sent (no fallback)', 'status-update', { assistant: assistantOnlyReport, number, account }, null],
  ['assistant events decide: listed', 'end-of-call-report', { assistant: assistantOnlyReport, number, account }, A],
  ['assistant without webhook_events gets every event', 'tool-calls', { assistant: assistantDefaultEvents }, { ...A, secret: null }],
  ['assistant without url: the number', 'end-of-call-report', { assistant: assistantNoUrl, number, account }, N],
  ['assistant with empty url string: the number', 'end-of-call-report', { assistant: { webhook_url: '' }, number, account }, N],
  // number level
  ['number webhook over account', 'status-update', { number, account }, N],
  ['number events decide: not listed means not sent', 'end-of-call-report', { number: numberOnlyStatus, account }, null],
  ['number without secret: unsigned', 'status-update', { number: numberNoSecret, account }, { ...N, secret: null }],
  ['number without webhook: the account', 'status-update', { number: numberNone, account }, O],
  // account level
  ['account alone', 'end-of-call-report', { account }, O],
  ['account events decide', 'end-of-call-report', { account: { webhook: { ...account.webhook, events: ['status-update'] } } }, null],
  ['nothing configured', 'status-update', {}, null],
  ['nothing configured (explicit nulls)', 'tool-calls', { tool: null, assistant: null, number: null, account: null }, null],
  // assistant-request: only number or account level
  ['assistant-request never goes to the assistant url', 'assistant-request', { assistant, number, account }, N],
  ['assistant-request never goes to a tool url', 'assistant-request', { tool, account }, O],
  ['assistant-request goes to the number webhook', 'assistant-request', { number, account }, N],
  ['assistant-request goes to the account without a number webhook', 'assistant-request', { number: numberNone, account }, O],
  ['assistant-request: number events decide (no fallback to the account)', 'assistant-request', { number: numberOnlyStatus, account }, null],
  ['assistant-request: account events decide', 'assistant-request', { account: accountNoRequest }, null],
  ['assistant-request with only an assistant url is not sent', 'assistant-request', { assistant }, null],
];

describe('resolveWebhookTarget (SPEC 6.3, DECISIONS 7)', () => {
  it.each(rows)('%s', (_name, event, levels, expected) => {
    expect(resolveWebhookTarget({ event, ...levels })).toEqual(expected);
  });

  it('is pure: the inputs are not changed', () => {
    const input = { event: 'status-update' as const, assistant: { ...assistant }, number: structuredClone(number), account: structuredClone(account) };
    const copy = structuredClone(input);
    resolveWebhookTarget(input);
    expect(input).toEqual(copy);
  });
});
