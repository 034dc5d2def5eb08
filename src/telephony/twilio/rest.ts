/** Twilio's REST API, as far as a live call needs it: transfer and hang up. */
import { request } from 'undici';
import { dialTwiml } from './twiml.js';

export interface TwilioCredentials {
  account_sid: string;
  auth_token: string;
}

export class TwilioRestError extends Error {
  override name = 'TwilioRestError';
  readonly code = 'TWILIO_REST_ERROR';
  /** For `ended_reason` `pipeline-error-twilio`. */
  readonly provider = 'twilio';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface TwilioRest {
  /** Replaces the call's TwiML with a `<Dial>` to `destination` (the stream ends). */
  transfer(credentials: TwilioCredentials, callSid: string, destination: string, callerId?: string): Promise<void>;
  /** Ends the call. */
  hangUp(credentials: TwilioCredentials, callSid: string): Promise<void>;
}

export function createTwilioRest(baseUrl: string, timeoutMs = 10_000): TwilioRest {
  async function updateCall(credentials: TwilioCredentials, callSid: string, form: Record<string, string>) {
    const url = `${baseUrl.replace(/\/$/, '')}/2010-04-01/Accounts/${encodeURIComponent(credentials.account_sid)}/Calls/${encodeURIComponent(callSid)}.json`;
    const auth = Buffer.from(`${credentials.account_sid}:${credentials.auth_token}`).toString('base64');
    let res;
    try {
      res = await request(url, {
        method: 'POST',
        headers: { authorization: `Basic ${auth}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form).toString(),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (err) {
      throw new TwilioRestError(`Twilio REST request failed: ${(err as Error).message}`);
    }
    const text = await res.body.text();
    if (res.statusCode >= 300) {
      let message = text.slice(0, 300);
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? message;
      } catch {
        // not JSON: keep the text
      }
      throw new TwilioRestError(`Twilio answered ${res.statusCode}: ${message}`, res.statusCode);
    }
  }

  return {
    transfer: (credentials, callSid, destination, callerId) =>
      updateCall(credentials, callSid, { Twiml: dialTwiml(destination, callerId) }),
    hangUp: (credentials, callSid) => updateCall(credentials, callSid, { Status: 'completed' }),
  };
}
