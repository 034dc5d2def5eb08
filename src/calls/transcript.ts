/**
 * A call's transcript as text: one `Assistant: …` or `Caller: …` line per spoken message, the
 * same in GET /calls, the call log and the end-of-call-report.
 */

/** Spoken messages only: tool and system messages are left out. */
export function transcriptText(messages: readonly { role: string; content: string }[]): string {
  return messages
    .filter((m) => m.role === 'assistant' || m.role === 'user')
    .map((m) => `${m.role === 'assistant' ? 'Assistant' : 'Caller'}: ${m.content}`)
    .join('\n');
}
