/**
 * How a carrier declares itself (DECISIONS 18): one folder under `src/telephony/<carrier>/` whose
 * `carrier.ts` exports a `carrier` made with `declareCarrier`: its id (the record's `transport`,
 * and a number's `provider` when it has numbers), its account settings (where they sit in
 * `PATCH /account`, their schemas, how a write merges with what is kept and what `GET /account`
 * shows), its `<CARRIER>_API_BASE`, and how one process runs it (`create`: its routes, its
 * transport, how it dials and hangs up outbound calls). `registry.ts` lists the declarations; the
 * runtime, the app's routes, the numbers' and account's schemas, the configuration and the
 * outbound path are derived from them. docs/carriers.md says which files a new carrier touches.
 */
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';
import type { OutboundCalls, OutboundCarrier } from '../calls/outbound-calls.js';
import type { CallService } from '../calls/service.js';
import type { CallStore } from '../calls/store.js';
import type { Config } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { RuntimeOptions } from '../runtime.js';
import type { AccountSettings } from '../store/account.js';
import type { Store } from '../store/index.js';
import type { MediaLiveness, StreamWatcher } from './liveness.js';

/** What a process gives a carrier to run on. */
export interface CarrierContext {
  config: Config;
  /** The runtime's options: a carrier reads its own there (`sip`, `twilioRest`). */
  options: RuntimeOptions;
  calls: CallService;
  /** The call sessions (a carrier's callbacks find their call by id). */
  callStore: CallStore;
  store: Store;
  logger: Logger;
  /** The address the carrier reaches us at (PUBLIC_URL). */
  publicUrl: string;
  watcher: StreamWatcher;
  liveness: MediaLiveness;
  metrics: Metrics;
  /** `<CARRIER>_API_BASE` as configured (the declared default unless set); '' for a carrier without one. */
  apiBase: string;
  /** A call refused before pickup because the database or Redis did not answer (counted per carrier). */
  onUnavailable(): void;
  /** Another carrier's own object, once started in this process (a web call's warm transfer dials through SIP). */
  instanceOf(id: string): unknown;
}

/** A carrier as one process runs it. */
export interface RunningCarrier<T = unknown> {
  /** The carrier's own object (`TwilioTelephony`, `SipTelephony`, …), for what needs more than the seam. */
  instance: T;
  /** Its HTTP routes and WebSocket upgrades on the app's server. */
  routes?(app: FastifyInstance): Promise<void> | void;
  /** How it places and stops outbound calls (a carrier with numbers). */
  outbound?: OutboundCarrier;
  /** Outbound calls, once made (the runtime makes them after the carriers): its callbacks end unanswered calls there. */
  wire?(outbound: OutboundCalls): void;
  /** The process stops: calls still up are ended at the carrier, sockets closed (after the live calls ended). */
  close?(): Promise<void> | void;
}

/**
 * A carrier's settings in the organization's account (`PATCH /account`, `GET /account`). `S` is
 * what is kept, `I` what a request sends, `V` what a response shows.
 */
export interface CarrierAccountSettings<S, I = unknown, V = unknown> {
  /**
   * Where they sit in the account's body: `['telnyx']` (`{"telnyx": {...}}`), or under a group
   * (`['telephony', 'twilio']`: `{"telephony": {"twilio": {...}}}`).
   */
  path: readonly [string] | readonly [string, string];
  /** What a request may send (strict); `null` (clear) and leaving it out are added by the account's schema. */
  input: z.ZodType<I>;
  /** What a response shows, nullable or not as `show` returns. */
  view: z.ZodType<V>;
  /** The settings kept in the account, or null. */
  read(account: AccountSettings): S | null;
  /** What to keep, from what was sent and what is kept (a write-only secret left out is kept); a problem is a 400. */
  merge(input: I, stored: S | null): S | { problem: string };
  /** What `GET /account` shows (secrets masked or left out). */
  show(stored: S | null): V;
  /** A response's value for the API's example (OpenAPI). */
  example: V;
  /** The account write that keeps `settings` (null clears them). */
  write(settings: S | null): Partial<AccountSettings>;
}

export interface CarrierDeclaration<T = unknown, S = unknown> {
  /**
   * Lower case (`a-z`, `0-9`, `-`): the record's `transport`, a number's `provider` (with
   * `numbers`), and the variables' prefix (`telnyx` → `TELNYX_API_BASE`).
   */
  id: string;
  /** As people write it: `Twilio`. */
  label: string;
  /**
   * A carrier whose calls come to and go from phone numbers: how the numbers' `provider`
   * describes it (`a SIP trunk (DECISIONS 15)`). Absent: no numbers (web calls).
   */
  numbers?: string;
  /** The default of `<CARRIER>_API_BASE`: where its API is. Absent: none. */
  apiBase?: string;
  /** Its settings in the organization's account. */
  account?: CarrierAccountSettings<S, any, any>;
  /** Why a number of this carrier cannot call out when this process does not run it (`create` gave null). */
  off?: { unusable: string; place: string };
  /** Runs the carrier in one process; null: it is off here (e.g. SIP with SIP_PORT=0). */
  create(ctx: CarrierContext): Promise<RunningCarrier<T> | null> | RunningCarrier<T> | null;
}

/** Any carrier's declaration, whatever its own object and settings (the registry's list). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyCarrierDeclaration = CarrierDeclaration<any, any>;

/** Checks the declaration's shape at compile time; returns it as it is. */
export function declareCarrier<T, S>(declaration: CarrierDeclaration<T, S>): CarrierDeclaration<T, S> {
  return declaration;
}

/** `<CARRIER>_API_BASE`. */
export function carrierApiBaseVariable(id: string): `${string}_API_BASE` {
  return `${id.toUpperCase().replaceAll('-', '_')}_API_BASE`;
}

/**
 * A carrier's API refused or failed a request of a call's (a hang-up, a transfer, a dial): the
 * carrier is named (`ended_reason` `pipeline-error-<carrier>`), and `status` is its HTTP status
 * (none: no answer at all), which the dialler reads (429 and 5xx: try again later).
 */
export class CarrierApiError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.CARRIER_API_ERROR] as const;
  override name = 'CarrierApiError';
  constructor(
    readonly provider: string,
    message: string,
    readonly status?: number,
    /** The carrier's own code for the failure (Telnyx's `90018`), when it gave one. */
    readonly carrierCode?: string,
  ) {
    super(ErrorCodes.CARRIER_API_ERROR, message);
  }
}
