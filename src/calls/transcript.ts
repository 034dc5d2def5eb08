/**
 * A call's transcript as text: one `Assistant: …` or `Caller: …` line per spoken message, the
 * same in GET /calls, the call log and the end-of-call-report.
 */

/**
 * Spoken messages only: tool and system messages are left out, and so is a `user` message a live
 * control added (the model read it; nobody said it).
 */
export function transcriptText(messages: readonly { role: string; content: string; source?: string }[]): string {
  return messages
    .filter((m) => m.role === 'assistant' || (m.role === 'user' && m.source !== 'control'))
    .map((m) => `${m.role === 'assistant' ? 'Assistant' : 'Caller'}: ${m.content}`)
    .join('\n');
}
