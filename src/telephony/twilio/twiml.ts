/** The TwiML answers of the voice webhook. */

const escapeXml = (s: string) =>
  s.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!);

/** Connects the call to our media WebSocket; parameters travel in `start.customParameters`. */
export function connectStreamTwiml(streamUrl: string, parameters: Record<string, string>): string {
  const params = Object.entries(parameters)
    .map(([name, value]) => `<Parameter name="${escapeXml(name)}" value="${escapeXml(value)}"/>`)
    .join('');
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="${escapeXml(streamUrl)}">${params}</Stream></Connect></Response>`;
}

/** Refuses the call before pickup: the caller hears it ring out or busy, nothing is billed. */
export function rejectTwiml(reason: 'rejected' | 'busy' = 'rejected'): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="${reason}"/></Response>`;
}

/** Used with the REST API to move a live call to another number. */
export function dialTwiml(destination: string, callerId?: string): string {
  const attr = callerId ? ` callerId="${escapeXml(callerId)}"` : '';
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Dial${attr}>${escapeXml(destination)}</Dial></Response>`;
}

/** Ends the call at once (an outbound call answered after it was ended). */
export function hangupTwiml(): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>`;
}

/**
 * A warm transfer's join: the call goes into the conference `name` (the call's id); it ends when
 * either party leaves, so neither stays alone in it.
 */
export function conferenceTwiml(name: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Dial><Conference startConferenceOnEnter="true" endConferenceOnExit="true" beep="false">${escapeXml(name)}</Conference></Dial></Response>`;
}
