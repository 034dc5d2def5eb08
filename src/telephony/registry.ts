/**
 * Every carrier this server has, one declaration each (`carrier.ts`), in the order the API lists
 * them: a new carrier's folder adds one line here. Everything else about carriers is derived from
 * this list: the numbers' `provider` values, the account's carrier settings (schemas, merge,
 * view), the `<CARRIER>_API_BASE` variables (src/config.ts), and what one process runs
 * (./carriers.ts: routes, transports, the outbound carriers). docs/carriers.md.
 */
import { carrierApiBaseVariable, type AnyCarrierDeclaration } from './carrier.js';
import { carrier as twilio } from './twilio/carrier.js';
import { carrier as sip } from './sip/carrier.js';
import { carrier as web } from './web/carrier.js';
import { carrier as telnyx } from './telnyx/carrier.js';

export const CARRIERS: readonly AnyCarrierDeclaration[] = checked([twilio, sip, web, telnyx]);

/** The declarations as given, once their ids are checked: lower case, each once. */
function checked(carriers: AnyCarrierDeclaration[]): AnyCarrierDeclaration[] {
  const seen = new Set<string>();
  for (const c of carriers) {
    if (!/^[a-z][a-z0-9-]*$/.test(c.id)) throw new Error(`carrier id "${c.id}": lower case letters, digits and "-" only`);
    if (seen.has(c.id)) throw new Error(`carrier ${c.id} is declared twice`);
    seen.add(c.id);
  }
  return carriers;
}

/** The declaration of a carrier by id. */
export function findCarrier(id: string): AnyCarrierDeclaration | undefined {
  return CARRIERS.find((c) => c.id === id);
}

/** The carriers whose calls come to and go from phone numbers. */
export function numberCarriers(carriers: readonly AnyCarrierDeclaration[] = CARRIERS): AnyCarrierDeclaration[] {
  return carriers.filter((c) => c.numbers !== undefined);
}

/** The values of a number's `provider`, the first the default: `["twilio", "sip", …]`. */
export function numberProviders(carriers: readonly AnyCarrierDeclaration[] = CARRIERS): [string, ...string[]] {
  const ids = numberCarriers(carriers).map((c) => c.id);
  if (ids.length === 0) throw new Error('no carrier has numbers');
  return ids as [string, ...string[]];
}

/** `provider`'s description: `Twilio Media Streams (default) or a SIP trunk (DECISIONS 15)`. */
export function numberProviderDescription(carriers: readonly AnyCarrierDeclaration[] = CARRIERS): string {
  const named = numberCarriers(carriers).map((c, i) => `${c.numbers!}${i === 0 ? ' (default)' : ''}`);
  const last = named.pop()!;
  return `who carries its calls: ${named.length > 0 ? `${named.join(', ')} or ${last}` : last}`;
}

/** `<CARRIER>_API_BASE` of every carrier that has an API, with its default. */
export function carrierVariables(carriers: readonly AnyCarrierDeclaration[] = CARRIERS): Array<{ name: `${string}_API_BASE`; default: string }> {
  return carriers.filter((c) => c.apiBase !== undefined).map((c) => ({ name: carrierApiBaseVariable(c.id), default: c.apiBase! }));
}

/** The carriers with settings in the account, in the registry's order. */
export function accountCarriers(carriers: readonly AnyCarrierDeclaration[] = CARRIERS): Array<AnyCarrierDeclaration & { account: NonNullable<AnyCarrierDeclaration['account']> }> {
  return carriers.filter((c): c is AnyCarrierDeclaration & { account: NonNullable<AnyCarrierDeclaration['account']> } => c.account !== undefined);
}
