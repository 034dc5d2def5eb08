/**
 * Telnyx's Call Control API, as far as calls need it (`TELNYX_API_BASE`, default
 * https://api.telnyx.com; JSON, `Authorization: Bearer <API key>`): dial (`POST /v2/calls`), and
 * the commands on a call (`POST /v2/calls/{call_control_id}/actions/<action>`): answer (with the
 * media stream), reject, hang up, transfer, start streaming. A refusal is a `CarrierApiError`
 * naming Telnyx, its HTTP status and the first of Telnyx's `errors` (`code`, `title`, `detail`).
 */
import { request } from 'undici';
import { CarrierApiError } from '../carrier.js';

/** Telnyx's code for a command on a call that has ended (a hang-up then has nothing left to do). */
export const CALL_ENDED = '90018';

/** The ids Telnyx gives a call: `call_control_id` addresses commands, the others correlate webhooks. */
export interface TelnyxCallIds {
  call_control_id: string;
  call_leg_id: string;
  call_session_id: string;
}

export type TelnyxAction = 'answer' | 'reject' | 'hangup' | 'transfer' | 'streaming_start';

/** A refusal or failure of Telnyx's API (`carrierCode`: Telnyx's own code of its first error). */
export const telnyxApiError = (message: string, status?: number, code?: string) => new CarrierApiError('telnyx', message, status, code);

export interface TelnyxApi {
  /** Places a call; resolves to its ids once Telnyx has taken it (the call then rings: `call.*` webhooks follow). */
  dial(apiKey: string, body: Record<string, unknown>): Promise<TelnyxCallIds>;
  /** A command on a call. */
  action(apiKey: string, callControlId: string, action: TelnyxAction, body?: Record<string, unknown>): Promise<void>;
}

export function createTelnyxApi(baseUrl: string, timeoutMs = 10_000): TelnyxApi {
  const base = `${baseUrl.replace(/\/$/, '')}/v2`;

  async function post(apiKey: string, path: string, body: Record<string, unknown>): Promise<unknown> {
    let res;
    try {
      res = await request(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (err) {
      throw telnyxApiError(`telnyx: the Call Control request failed: ${(err as Error).message}`);
    }
    const text = await res.body.text().catch(() => '');
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: the text says what it is
    }
    if (res.statusCode >= 300) {
      const first = (json as { errors?: Array<{ code?: unknown; title?: unknown; detail?: unknown }> } | null)?.errors?.[0];
      const code = first?.code === undefined ? undefined : String(first.code);
      const said = [first?.title, first?.detail].filter((x): x is string => typeof x === 'string' && x !== '').join(': ') || text.slice(0, 200);
      throw telnyxApiError(`telnyx answered ${res.statusCode}: ${said}${code ? ` (${code})` : ''}`, res.statusCode, code);
    }
    return json;
  }

  return {
    async dial(apiKey, body) {
      const json = await post(apiKey, '/calls', body);
      const data = (json as { data?: Partial<TelnyxCallIds> } | null)?.data;
      if (!data || typeof data.call_control_id !== 'string' || data.call_control_id === '') {
        throw telnyxApiError('telnyx took the call but its answer had no call_control_id');
      }
      return {
        call_control_id: data.call_control_id,
        call_leg_id: typeof data.call_leg_id === 'string' ? data.call_leg_id : '',
        call_session_id: typeof data.call_session_id === 'string' ? data.call_session_id : '',
      };
    },
    async action(apiKey, callControlId, action, body = {}) {
      await post(apiKey, `/calls/${encodeURIComponent(callControlId)}/actions/${action}`, body);
    },
  };
}
