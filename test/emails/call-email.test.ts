/** The notification e-mail of a call (DECISIONS 13): what it says, escaped, and nothing of the conversation with gdpr_mode. */
import { describe, expect, it } from 'vitest';
import { effectiveAssistant } from '../../engine/assistant.js';
import type { CallRecord } from '../../src/calls/store.js';
import { callEmail, escapeHtml, formatDuration, isAnsweredCall, notificationRecipients } from '../../src/notifications/call-email.js';
import { callRecord } from '../helpers/call-record.js';

const assistant = (extra: Record<string, unknown> = {}) =>
  effectiveAssistant({
    name: 'Front desk',
    business_name: 'Acme Dental',
    tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
    notification_email: 'owner@acme-dental.example',
    ...extra,
  }) as unknown as Record<string, unknown>;

const message = (role: 'assistant' | 'user' | 'tool', content: string, seconds: number) => ({
  role,
  content,
  time: new Date(Date.parse('2025-06-02T09:14:05.000Z') + seconds * 1000).toISOString(),
  seconds_from_start: seconds,
  node_id: 'greeting',
});

const endedCall = (patch: Partial<CallRecord> = {}): CallRecord =>
  callRecord({
    status: 'ended',
    phone_number: { number: '+14155550100', name: 'Main line' },
    customer: { number: '+14155550199' },
    assistant: assistant(),
    started_at: '2025-06-02T09:14:05.000Z',
    ended_at: '2025-06-02T09:16:10.400Z',
    ended_reason: 'customer-ended-call',
    nodes_visited: ['greeting', 'booking', 'bye'],
    messages: [
      message('assistant', 'Hello, Acme Dental!', 0),
      message('user', 'I would like to book a cleaning on Tuesday.', 3),
      message('tool', '{"slots": 3}', 4),
      message('assistant', 'Tuesday at 3 pm is free.', 5),
    ],
    structured_data: { appointment: 'Tuesday 3 pm', new_patient: true },
    ...patch,
  });

describe('callEmail', () => {
  it('summarizes the call in both parts: number, customer, times, duration, ended_reason, nodes, structured data, transcript', () => {
    const call = endedCall();
    const { subject, text, html } = callEmail(call);
    expect(subject).toBe('Acme Dental: call from +14155550199, 2 min 5 s (customer-ended-call)');
    for (const part of [text, html]) {
      for (const expected of [
        call.id,
        'inbound phone call',
        '+14155550100 (Main line)',
        '+14155550199',
        'Front desk',
        '2025-06-02 09:14:05 UTC',
        '2025-06-02 09:16:10 UTC',
        '2 min 5 s',
        'customer-ended-call',
        'Tuesday 3 pm',
        'new_patient',
        'I would like to book a cleaning on Tuesday.',
        'Tuesday at 3 pm is free.',
      ]) {
        expect(part, expected).toContain(expected);
      }
      // tool messages are not part of a transcript
      expect(part).not.toContain('slots');
    }
    expect(text).toContain('Nodes visited: greeting → booking → bye');
    expect(html).toContain('greeting → booking → bye');
    expect(text).toContain('Assistant: Hello, Acme Dental!\nCaller: I would like to book a cleaning on Tuesday.\nAssistant: Tuesday at 3 pm is free.');
    expect(html).toMatch(/^<!DOCTYPE html>/);
  });

  it('escapes everything in the HTML part: the conversation, names, structured data', () => {
    const attack = '<script>alert("x")</script> & <img src=x onerror=alert(1)>';
    const call = endedCall({
      customer: { number: '+14155550199', name: `Eve ${attack}` },
      type: 'outbound_phone_call',
      answered_by: 'human',
      assistant: assistant({ name: `Bot ${attack}`, business_name: `Shop ${attack}` }),
      messages: [message('user', attack, 1), message('assistant', `You said ${attack}`, 2)],
      nodes_visited: [`<b>node</b>`],
      errors: [{ code: 'UNKNOWN', message: `tool failed: ${attack}` }],
      structured_data: { [`<k>`]: attack },
    });
    const { subject, html, text } = callEmail(call);
    expect(html).not.toMatch(/<script|<img|<b>|<k>/);
    expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;');
    expect(html).toContain(`<title>${escapeHtml(subject)}</title>`);
    // the plain part is text: as said
    expect(text).toContain(`Caller: ${attack}`);
    expect(text).toContain('Answered by:');
    expect(subject).toMatch(/^Shop .*: call to \+14155550199 \(Eve /);
  });

  it('with gdpr_mode has nothing of the conversation, but still the summary and structured data', () => {
    const call = endedCall({ assistant: assistant({ gdpr_mode: true }) });
    const { subject, text, html } = callEmail(call);
    for (const part of [subject, text, html]) {
      expect(part).not.toContain('book a cleaning');
      expect(part).not.toContain('Hello, Acme Dental!');
      expect(part).not.toContain('3 pm is free');
    }
    expect(text).toContain('gdpr_mode');
    expect(html).toContain('gdpr_mode');
    expect(text).toContain('customer-ended-call');
    expect(text).toContain('Tuesday 3 pm');
  });

  it('copes with a web call: no number, no customer', () => {
    const call = endedCall({ type: 'web_call', phone_number: null, customer: null, number_id: null, transport: 'web' });
    const { subject, text, html } = callEmail(call);
    expect(subject).toBe('Acme Dental: web call, 2 min 5 s (customer-ended-call)');
    expect(text).toContain('web call (browser)');
    expect(text).toMatch(/Customer:\s+— \(web call\)/);
    expect(html).toContain('— (web call)');
  });

  it('says when nothing was said, and leaves out structured data that is not there', () => {
    const { text, html } = callEmail(endedCall({ messages: [], structured_data: undefined }));
    expect(text).toContain('Nothing was said.');
    expect(html).toContain('Nothing was said.');
    expect(text).not.toContain('Structured data');
  });

  it('keeps the subject on one line', () => {
    const { subject } = callEmail(endedCall({ assistant: assistant({ business_name: 'Acme\r\nBcc: victim@example.com' }) }));
    expect(subject).not.toMatch(/[\r\n]/);
  });
});

describe('who gets it, and when', () => {
  it('notification_email, then notification_emails, each address once', () => {
    const call = endedCall({
      assistant: assistant({
        notification_email: 'owner@acme-dental.example',
        notification_emails: ['desk@acme-dental.example', 'Owner@Acme-Dental.example', 'desk@acme-dental.example'],
      }),
    });
    expect(notificationRecipients(call)).toEqual(['owner@acme-dental.example', 'desk@acme-dental.example']);
    expect(notificationRecipients(endedCall({ assistant: assistant({ notification_email: null }) }))).toEqual([]);
    expect(notificationRecipients(endedCall({ assistant: {} }))).toEqual([]);
  });

  it('an answered call is one that started', () => {
    expect(isAnsweredCall(endedCall())).toBe(true);
    expect(isAnsweredCall(endedCall({ started_at: null, ended_reason: 'customer-busy' }))).toBe(false);
  });

  it('formats durations', () => {
    expect(formatDuration(0)).toBe('0 s');
    expect(formatDuration(44.6)).toBe('45 s');
    expect(formatDuration(125)).toBe('2 min 5 s');
    expect(formatDuration(3603)).toBe('1 h 0 min 3 s');
  });
});
