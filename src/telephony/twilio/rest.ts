/** Twilio's REST API, as far as calls need it: place a call, transfer, hang up, cancel. */
import { request } from 'undici';
import { ErrorCodes, SwitchboardError } from '../../../engine/errors.js';
import { dialTwiml } from './twiml.js';

export interface TwilioCredentials {
  account_sid: string;
  auth_token: string;
}

export class TwilioRestError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.TWILIO_REST_ERROR] as const;
  override name = 'TwilioRestError';
  /** The carrier, for `ended_reason` `pipeline-error-twilio`. */
  readonly provider = 'twilio';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(ErrorCodes.TWILIO_REST_ERROR, message);
  }
}

/** What `Calls.json` takes to place an outbound call (Twilio's parameter names). */
export interface PlaceCall {
  to: string;
  from: string;
  /** Twilio asks it for the call's TwiML once the callee answers (or `twiml` is the call's TwiML). */
  url?: string;
  /** The call's TwiML, given at once instead of a `url` (a warm transfer's operator leg). */
  twiml?: string;
  /** Signed progress callbacks: initiated, ringing, answered, completed. */
  statusCallback: string;
  /** Seconds to ring before `no-answer`. */
  timeoutSeconds: number;
  /** Answering-machine detection, asynchronous (the call is not held for it), waiting for the end of the greeting. */
  machineDetection?: { callback: string } | null;
}

export interface TwilioRest {
  /** Places a call; resolves to its CallSid once Twilio has accepted it. */
  createCall(credentials: TwilioCredentials, call: PlaceCall): Promise<string>;
  /** Cancels a call that has not been answered yet (`canceled`). */
  cancel(credentials: TwilioCredentials, callSid: string): Promise<void>;
  /** Replaces the call's TwiML with a `<Dial>` to `destination` (the stream ends). */
  transfer(credentials: TwilioCredentials, callSid: string, destination: string, callerId?: string): Promise<void>;
  /** Ends the call. */
  hangUp(credentials: TwilioCredentials, callSid: string): Promise<void>;
  /** Replaces the call's TwiML (its stream ends): a warm transfer moves both legs into a `<Conference>`. */
  redirect(credentials: TwilioCredentials, callSid: string, twiml: string): Promise<void>;
}

export function createTwilioRest(baseUrl: string, timeoutMs = 10_000): TwilioRest {
  const callsUrl = (credentials: TwilioCredentials, callSid?: string) =>
    `${baseUrl.replace(/\/$/, '')}/2010-04-01/Accounts/${encodeURIComponent(credentials.account_sid)}/Calls` +
    (callSid ? `/${encodeURIComponent(callSid)}.json` : '.json');

  async function post(credentials: TwilioCredentials, url: string, form: URLSearchParams): Promise<string> {
    const auth = Buffer.from(`${credentials.account_sid}:${credentials.auth_token}`).toString('base64');
    let res;
    try {
      res = await request(url, {
        method: 'POST',
        headers: { authorization: `Basic ${auth}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
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
    return text;
  }

  const updateCall = (credentials: TwilioCredentials, callSid: string, form: Record<string, string>) =>
    post(credentials, callsUrl(credentials, callSid), new URLSearchParams(form)).then(() => undefined);

  return {
    async createCall(credentials, call) {
      const form = new URLSearchParams({
        To: call.to,
        From: call.from,
        ...(call.twiml !== undefined ? { Twiml: call.twiml } : { Url: call.url ?? '', Method: 'POST' }),
        StatusCallback: call.statusCallback,
        StatusCallbackMethod: 'POST',
        Timeout: String(call.timeoutSeconds),
      });
      for (const event of ['initiated', 'ringing', 'answered', 'completed']) form.append('StatusCallbackEvent', event);
      if (call.machineDetection) {
        form.set('MachineDetection', 'DetectMessageEnd');
        form.set('AsyncAmd', 'true');
        form.set('AsyncAmdStatusCallback', call.machineDetection.callback);
        form.set('AsyncAmdStatusCallbackMethod', 'POST');
      }
      const text = await post(credentials, callsUrl(credentials), form);
      let sid: unknown;
      try {
        sid = (JSON.parse(text) as { sid?: unknown }).sid;
      } catch {
        // handled below
      }
      if (typeof sid !== 'string' || !/^CA[0-9a-fA-F]{32}$/.test(sid)) {
        throw new TwilioRestError(`Twilio accepted the call but its answer had no call SID: ${text.slice(0, 200)}`);
      }
      return sid;
    },
    cancel: (credentials, callSid) => updateCall(credentials, callSid, { Status: 'canceled' }),
    transfer: (credentials, callSid, destination, callerId) =>
      updateCall(credentials, callSid, { Twiml: dialTwiml(destination, callerId) }),
    hangUp: (credentials, callSid) => updateCall(credentials, callSid, { Status: 'completed' }),
    redirect: (credentials, callSid, twiml) => updateCall(credentials, callSid, { Twiml: twiml }),
  };
}
