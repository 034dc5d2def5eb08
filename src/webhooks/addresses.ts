/**
 * Which IP addresses a webhook may reach: public unicast only (DECISIONS 7). IPv4-mapped,
 * IPv4-compatible, NAT64 and 6to4 IPv6 forms are judged by the IPv4 address inside them.
 */
import { isIP } from 'node:net';

type Range = readonly [prefix: readonly number[], bits: number, reason: string];

const IPV4_BLOCKED: readonly Range[] = [
  [[0, 0, 0, 0], 8, 'unspecified ("this network")'],
  [[10, 0, 0, 0], 8, 'private'],
  [[100, 64, 0, 0], 10, 'shared (CGNAT)'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link-local'],
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 0, 0, 0], 24, 'IETF protocol assignment'],
  [[192, 0, 2, 0], 24, 'documentation'],
  [[192, 88, 99, 0], 24, '6to4 relay anycast'],
  [[192, 168, 0, 0], 16, 'private'],
  [[198, 18, 0, 0], 15, 'benchmarking'],
  [[198, 51, 100, 0], 24, 'documentation'],
  [[203, 0, 113, 0], 24, 'documentation'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[255, 255, 255, 255], 32, 'broadcast'],
  [[240, 0, 0, 0], 4, 'reserved'],
];

const IPV6_BLOCKED: readonly Range[] = [
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 128, 'unspecified'],
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128, 'loopback'],
  [[0x00], 8, 'reserved'],
  [[0x00, 0x64, 0xff, 0x9b, 0x00, 0x01], 48, 'local-use NAT64'],
  [[0x01, 0x00, 0, 0, 0, 0, 0, 0], 64, 'discard-only'],
  [[0x20, 0x01, 0x0d, 0xb8], 32, 'documentation'],
  [[0x20, 0x01, 0x00, 0x00], 23, 'IETF protocol assignment'],
  [[0x3f, 0xff, 0x00], 20, 'documentation'],
  [[0xfc], 7, 'unique-local'],
  [[0xfe, 0x80], 10, 'link-local'],
  [[0xfe, 0xc0], 10, 'site-local'],
  [[0xff], 8, 'multicast'],
];

function inRange(bytes: readonly number[], prefix: readonly number[], bits: number): boolean {
  for (let i = 0; i < bits; i += 8) {
    const remaining = Math.min(8, bits - i);
    const mask = (0xff << (8 - remaining)) & 0xff;
    if (((bytes[i / 8] ?? 0) & mask) !== ((prefix[i / 8] ?? 0) & mask)) return false;
  }
  return true;
}

function parseIPv4(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const bytes = parts.map((p) => (/^\d{1,3}$/.test(p) ? Number(p) : NaN));
  return bytes.every((b) => b >= 0 && b <= 255) ? bytes : null;
}

/** 16 bytes of an IPv6 address (zone id dropped, embedded dotted IPv4 accepted). */
export function parseIPv6(text: string): number[] | null {
  let s = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (isIP(s) !== 6) return null;
  let tail: number[] = [];
  const lastColon = s.lastIndexOf(':');
  if (s.slice(lastColon + 1).includes('.')) {
    const v4 = parseIPv4(s.slice(lastColon + 1));
    if (!v4) return null;
    tail = v4;
    s = `${s.slice(0, lastColon + 1)}0:0`;
  }
  const [head, rest] = s.includes('::') ? (s.split('::') as [string, string]) : [s, null];
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = groups(head);
  const right = rest === null ? [] : groups(rest);
  const fill = rest === null ? 0 : 8 - left.length - right.length;
  const all = [...left, ...Array<number>(fill).fill(0), ...right];
  if (all.length !== 8) return null;
  const bytes = all.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/**
 * What kind of address must not be reached (`"loopback address"`, `"IPv4-mapped IPv6 form of a
 * private address"`, …), or `null` for a public unicast address. Anything that is not an IP
 * address is refused as `"not an IP address"`. Every answer names the address itself, so that a
 * sentence can use it as it is.
 */
export function blockedAddressReason(address: string): string | null {
  const v4 = parseIPv4(address);
  if (v4) return kind(IPV4_BLOCKED.find(([p, bits]) => inRange(v4, p, bits)));
  const v6 = parseIPv6(address);
  if (!v6) return 'not an IP address';
  const embedded = embeddedIPv4(v6);
  if (embedded) {
    const reason = blockedAddressReason(embedded.address);
    return reason === null ? null : `${embedded.form} of ${/^[aeiou]/i.test(reason) ? 'an' : 'a'} ${reason}`;
  }
  return kind(IPV6_BLOCKED.find(([p, bits]) => inRange(v6, p, bits)));
}

const kind = (range: Range | undefined): string | null => (range ? `${range[2]} address` : null);

/** The IPv4 address an IPv6 form carries (mapped, compatible, NAT64, 6to4), if any. */
function embeddedIPv4(b: number[]): { address: string; form: string } | null {
  const tail = (from: number) => b.slice(from, from + 4).join('.');
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return { address: tail(12), form: 'IPv4-mapped IPv6 form' };
  // ::a.b.c.d (deprecated IPv4-compatible), but not :: and ::1 themselves
  if (zeros(0, 12) && !zeros(12, 15)) return { address: tail(12), form: 'IPv4-compatible IPv6 form' };
  if (inRange(b, [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96)) {
    return { address: tail(12), form: 'NAT64 form' };
  }
  if (b[0] === 0x20 && b[1] === 0x02) return { address: tail(2), form: '6to4 form' };
  return null;
}
