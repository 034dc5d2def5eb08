/**
 * The notification e-mail of one call (DECISIONS 13): its summary (number, customer, times,
 * duration, `ended_reason`, nodes visited, structured data) and its transcript unless the
 * assistant has `gdpr_mode`, as plain text and as HTML. Pure: a call record in, a message out.
 * Everything the HTML shows is escaped: the conversation, names and structured data are other
 * people's words.
 */
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { CallRecord } from '../calls/store.js';
import { transcriptText } from '../calls/transcript.js';

export interface CallEmail {
  subject: string;
  text: string;
  html: string;
}

/** What an e-mail needs of a call: its record as the call left it (the report already made). */
export type EmailedCall = Pick<
  CallRecord,
  | 'id'
  | 'type'
  | 'phone_number'
  | 'customer'
  | 'answered_by'
  | 'assistant'
  | 'started_at'
  | 'ended_at'
  | 'ended_reason'
  | 'nodes_visited'
  | 'messages'
  | 'errors'
  | 'structured_data'
>;

type EmailAssistant = Partial<Pick<EffectiveAssistant, 'name' | 'business_name' | 'gdpr_mode' | 'notification_email' | 'notification_emails'>>;

const assistantOf = (call: Pick<CallRecord, 'assistant'>): EmailAssistant => (call.assistant ?? {}) as EmailAssistant;

/**
 * Answered: the call reached `in-progress` (its conversation started): an inbound call, an
 * outbound call a person or a machine picked up, a web call. Rejected and unanswered calls were not.
 */
export const isAnsweredCall = (call: Pick<CallRecord, 'started_at'>): boolean => call.started_at !== null;

/** `notification_email`, then `notification_emails`, each address once (compared without case). */
export function notificationRecipients(call: Pick<CallRecord, 'assistant'>): string[] {
  const assistant = assistantOf(call);
  const all = [assistant.notification_email, ...(Array.isArray(assistant.notification_emails) ? assistant.notification_emails : [])];
  const seen = new Set<string>();
  const recipients: string[] = [];
  for (const address of all) {
    if (typeof address !== 'string' || address.trim() === '') continue;
    const key = address.trim().toLowerCase();
    if (seen.has(key)) continue;
    seen.add(key);
    recipients.push(address.trim());
  }
  return recipients;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text as HTML text or attribute value: `& < > " '` escaped. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);

/** `2 min 5 s`, `1 h 0 min 3 s`, `45 s`. */
export function formatDuration(seconds: number): string {
  const total = Math.max(0, Math.round(seconds));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h} h ${m} min ${s} s`;
  if (m > 0) return `${m} min ${s} s`;
  return `${s} s`;
}

/** `2025-06-02 09:14:05 UTC`. */
const formatTime = (iso: string | null): string => (iso === null ? '—' : `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC`);

const durationSeconds = (call: EmailedCall): number =>
  call.started_at && call.ended_at ? Math.max(0, (Date.parse(call.ended_at) - Date.parse(call.started_at)) / 1000) : 0;

const TYPE_LABELS: Record<string, string> = {
  inbound_phone_call: 'inbound phone call',
  outbound_phone_call: 'outbound phone call',
  web_call: 'web call (browser)',
};

const party = (p: { number: string; name?: string | null } | null): string | null =>
  p === null ? null : p.name ? `${p.number} (${p.name})` : p.number;

/** The subject: who the call was for, with whom, how long, how it ended. */
function subjectOf(call: EmailedCall): string {
  const assistant = assistantOf(call);
  const who = assistant.business_name || assistant.name || 'Switchboard';
  const customer = party(call.customer);
  const what =
    call.type === 'web_call' || customer === null
      ? 'web call'
      : call.type === 'outbound_phone_call'
        ? `call to ${customer}`
        : `call from ${customer}`;
  // a header is one line: names come from people and APIs
  return `${who}: ${what}, ${formatDuration(durationSeconds(call))} (${call.ended_reason ?? 'ended'})`.replace(/[\r\n]+/g, ' ');
}

/** The summary's rows, label and value, in the order both parts show them. */
function summaryRows(call: EmailedCall): [string, string][] {
  const assistant = assistantOf(call);
  const rows: [string, string][] = [
    ['Call', call.id],
    ['Type', TYPE_LABELS[call.type] ?? call.type],
    ['Number', party(call.phone_number) ?? '— (web call)'],
    ['Customer', party(call.customer) ?? '— (web call)'],
  ];
  if (assistant.name) rows.push(['Assistant', assistant.name]);
  rows.push(
    ['Started', formatTime(call.started_at)],
    ['Ended', formatTime(call.ended_at)],
    ['Duration', formatDuration(durationSeconds(call))],
    ['Ended reason', call.ended_reason ?? '—'],
  );
  if (call.type === 'outbound_phone_call') rows.push(['Answered by', call.answered_by ?? 'not known']);
  rows.push(['Nodes visited', call.nodes_visited.length > 0 ? call.nodes_visited.join(' → ') : '—']);
  if (call.errors.length > 0) rows.push(['Notes', call.errors.map((e) => e.message).join('; ')]);
  return rows;
}

const hasStructuredData = (call: EmailedCall) => call.structured_data !== undefined && call.structured_data !== null;
const structuredJson = (data: unknown) => JSON.stringify(data, null, 2) ?? String(data);

const GDPR_NOTE = 'The transcript is not included: the assistant has gdpr_mode on, so nothing of the conversation is kept or sent.';

/** The e-mail of a call; with `gdpr_mode`, nothing of the conversation is in it. */
export function callEmail(call: EmailedCall): CallEmail {
  const gdpr = assistantOf(call).gdpr_mode === true;
  // as the transcript: a `user` message a live control added was not said by the caller
  const spoken = gdpr ? [] : call.messages.filter((m) => m.role === 'assistant' || (m.role === 'user' && m.source !== 'control'));
  const rows = summaryRows(call);
  const subject = subjectOf(call);

  const width = Math.max(...rows.map(([label]) => label.length)) + 2;
  const text = [
    'Call summary',
    '',
    ...rows.map(([label, value]) => `${`${label}:`.padEnd(width)}${value}`),
    ...(hasStructuredData(call) ? ['', 'Structured data', structuredJson(call.structured_data)] : []),
    '',
    'Transcript',
    gdpr ? GDPR_NOTE : spoken.length > 0 ? transcriptText(spoken) : 'Nothing was said.',
    '',
    '-- ',
    'Sent by Switchboard after the call.',
    '',
  ].join('\n');

  const cell = 'padding:4px 12px 4px 0;vertical-align:top;text-align:left';
  const html = [
    '<!DOCTYPE html>',
    '<html><head><meta charset="utf-8">',
    `<title>${escapeHtml(subject)}</title></head>`,
    '<body style="font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:14px;color:#1f2328">',
    '<h2 style="font-size:18px">Call summary</h2>',
    '<table style="border-collapse:collapse">',
    ...rows.map(([label, value]) => `<tr><th style="${cell};color:#59636e">${escapeHtml(label)}</th><td style="${cell}">${escapeHtml(value)}</td></tr>`),
    '</table>',
    ...(hasStructuredData(call)
      ? [
          '<h3 style="font-size:15px">Structured data</h3>',
          `<pre style="background:#f6f8fa;padding:8px;white-space:pre-wrap">${escapeHtml(structuredJson(call.structured_data))}</pre>`,
        ]
      : []),
    '<h3 style="font-size:15px">Transcript</h3>',
    gdpr
      ? `<p><em>${escapeHtml(GDPR_NOTE)}</em></p>`
      : spoken.length > 0
        ? [
            '<table style="border-collapse:collapse">',
            ...spoken.map(
              (m) =>
                `<tr><th style="${cell};color:#59636e">${m.role === 'assistant' ? 'Assistant' : 'Caller'}</th><td style="${cell}">${escapeHtml(m.content)}</td></tr>`,
            ),
            '</table>',
          ].join('\n')
        : '<p>Nothing was said.</p>',
    '<p style="color:#59636e;font-size:12px">Sent by Switchboard after the call.</p>',
    '</body></html>',
    '',
  ].join('\n');

  return { subject, text, html };
}
