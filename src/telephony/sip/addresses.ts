/** Trunk addresses: the sources an organization takes INVITEs from, and its outbound proxy. */
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import os from 'node:os';
import type { Logger } from 'pino';
import { parseUri } from './message.js';

/** `203.0.113.7`, `203.0.113.0/24`, `2001:db8::/32` → what `net.BlockList` takes; null when it is none. */
export function sipAddressRange(value: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [address = '', prefixText, extra] = value.trim().split('/');
  if (extra !== undefined) return null;
  const version = net.isIP(address);
  if (!version) return null;
  const max = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return null;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** Whether `address` (as a socket gives it; `::ffff:` IPv4 too) is in one of `ranges`. */
export function addressAllowed(address: string, ranges: readonly string[]): boolean {
  if (ranges.length === 0) return false;
  const list = new net.BlockList();
  for (const r of ranges) {
    const range = sipAddressRange(r);
    if (range) list.addSubnet(range.address, range.prefix, range.family);
  }
  const plain = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  const family = net.isIP(plain) === 6 ? 'ipv6' : 'ipv4';
  try {
    return list.check(plain, family);
  } catch {
    return false;
  }
}

/** The outbound proxy, `sip:host[:port][;transport=udp|tcp]`. */
export interface SipProxy {
  host: string;
  port: number;
  protocol: 'UDP' | 'TCP';
}

export function parseSipProxy(value: string): SipProxy | null {
  const uri = parseUri(value);
  if (!uri || uri.scheme !== 'sip' || uri.user) return null;
  const transport = (uri.params.get('transport') ?? 'udp').toLowerCase();
  if (transport !== 'udp' && transport !== 'tcp') return null;
  return { host: uri.host, port: uri.port ?? 5060, protocol: transport === 'tcp' ? 'TCP' : 'UDP' };
}

export function sipProxyProblem(value: string): string | null {
  return parseSipProxy(value) ? null : 'not a sip: URI';
}

/**
 * What goes in our Contact and SDP when SIP_PUBLIC_ADDRESS is unset: the listening address, or
 * for a wildcard (0.0.0.0, ::) this machine's first external IPv4 address (warned: behind NAT,
 * set SIP_PUBLIC_ADDRESS).
 */
export function defaultSipAddress(host: string, logger: Logger): string | undefined {
  if (host !== '0.0.0.0' && host !== '::') return undefined;
  const external = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal);
  const address = external?.address ?? '127.0.0.1';
  logger.warn({ address }, 'SIP_PUBLIC_ADDRESS is unset: our SDP and Contact give this machine\'s address; behind NAT, set it');
  return address;
}

/**
 * SIP_PUBLIC_ADDRESS as our SDP and Contact need it: an IP address (carriers take no host name in
 * SDP's `c=` line). A host name is resolved once, at start; one that does not resolve stops the start.
 */
export async function sipPublicAddress(value: string | undefined): Promise<string | undefined> {
  if (value === undefined || net.isIP(value) !== 0) return value;
  try {
    return (await lookup(value)).address;
  } catch (err) {
    throw new Error(`SIP_PUBLIC_ADDRESS ${value} does not resolve to an address: ${(err as Error).message}`);
  }
}
