import { createServer } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blockedAddressReason } from '../../src/webhooks/addresses.js';
import { WebhookHttpClient, type HttpOutcome, type ResolveHost } from '../../src/webhooks/http.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const post = (client: WebhookHttpClient, url: string, timeoutMs = 2_000) =>
  client.post(url, { headers: { 'content-type': 'application/json' }, body: '{"message":{}}', timeoutMs });

const failure = (out: HttpOutcome) => (out.ok ? `HTTP ${out.status}` : out.code);

/** A free TCP port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

async function ipv6LoopbackWorks(): Promise<boolean> {
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '::1', () => resolve());
    });
    return true;
  } catch {
    return false;
  } finally {
    server.close();
  }
}

describe('blockedAddressReason', () => {
  it.each([
    ['127.0.0.1', 'loopback address'],
    ['127.255.255.254', 'loopback address'],
    ['10.0.0.1', 'private address'],
    ['172.16.0.1', 'private address'],
    ['172.31.255.255', 'private address'],
    ['192.168.1.1', 'private address'],
    ['169.254.169.254', 'link-local address'],
    ['100.64.0.1', 'shared (CGNAT) address'],
    ['100.127.255.255', 'shared (CGNAT) address'],
    ['0.0.0.0', 'unspecified ("this network") address'],
    ['224.0.0.1', 'multicast address'],
    ['239.255.255.250', 'multicast address'],
    ['255.255.255.255', 'broadcast address'],
    ['240.0.0.1', 'reserved address'],
    ['192.0.2.10', 'documentation address'],
    ['198.18.0.1', 'benchmarking address'],
    ['::1', 'loopback address'],
    ['::', 'unspecified address'],
    ['fe80::1', 'link-local address'],
    ['fe80::1%eth0', 'link-local address'],
    ['fc00::1', 'unique-local address'],
    ['fd12:3456:789a::1', 'unique-local address'],
    ['ff02::1', 'multicast address'],
    ['2001:db8::1', 'documentation address'],
    ['::ffff:127.0.0.1', 'IPv4-mapped IPv6 form of a loopback address'],
    ['::ffff:7f00:1', 'IPv4-mapped IPv6 form of a loopback address'],
    ['::ffff:10.0.0.1', 'IPv4-mapped IPv6 form of a private address'],
    ['::ffff:169.254.169.254', 'IPv4-mapped IPv6 form of a link-local address'],
    ['::127.0.0.1', 'IPv4-compatible IPv6 form of a loopback address'],
    ['64:ff9b::10.0.0.1', 'NAT64 form of a private address'],
    ['2002:7f00:1::', '6to4 form of a loopback address'],
    ['::ffff:0.0.0.0', 'IPv4-mapped IPv6 form of an unspecified ("this network") address'],
    ['[::1]', 'loopback address'],
    ['not-an-ip', 'not an IP address'],
  ])('%s is refused (%s)', (address, reason) => {
    expect(blockedAddressReason(address)).toBe(reason);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '93.184.215.14', '2606:4700:4700::1111', '2a00:1450:4001:81b::200e', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8'])(
    '%s is public',
    (address) => {
      expect(blockedAddressReason(address)).toBeNull();
    },
  );
});

describe('outbound requests with WEBHOOK_ALLOW_PRIVATE off', () => {
  let receiver: Receiver;
  let client: WebhookHttpClient;
  const lookups: string[] = [];
  const resolve: ResolveHost = async (host) => {
    lookups.push(host);
    const table: Record<string, string> = {
      'internal.example': '10.0.0.1',
      'metadata.example': '169.254.169.254',
      'mapped.example': '::ffff:127.0.0.1',
      'mixed.example': '127.0.0.1',
    };
    if (host === 'localhost') return [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }];
    if (table[host]) return [{ address: table[host]!, family: table[host]!.includes(':') ? 6 : 4 }];
    throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    client = new WebhookHttpClient({ allowPrivate: false, resolve });
  });
  afterAll(async () => {
    await client.close();
    await receiver.close();
  });
  afterEach(() => {
    lookups.length = 0;
  });

  it.each([
    ['127.0.0.1', (p: number) => `http://127.0.0.1:${p}/hook`],
    ['[::1]', (p: number) => `http://[::1]:${p}/hook`],
    ['169.254.169.254', () => 'http://169.254.169.254/latest/meta-data/'],
    ['10.0.0.1', () => 'http://10.0.0.1/hook'],
    ['::ffff:127.0.0.1', (p: number) => `http://[::ffff:127.0.0.1]:${p}/hook`],
    ['0.0.0.0', (p: number) => `http://0.0.0.0:${p}/hook`],
    ['decimal 2130706433 (= 127.0.0.1)', (p: number) => `http://2130706433:${p}/hook`],
  ])('refuses %s', async (_name, url) => {
    const out = await post(client, url(receiver.port));
    expect(failure(out)).toBe('BLOCKED_ADDRESS');
    expect(!out.ok && out.detail).toMatch(/refused to connect to .*address/);
    expect(!out.ok && out.reason).toBe('blocked address (only public addresses are allowed)');
  });

  it('refusals name the kind of address once ("address address" was said for mapped forms)', async () => {
    const out = await post(client, `http://[::ffff:127.0.0.1]:${receiver.port}/hook`);
    expect(!out.ok && out.detail).toMatch(/^refused to connect to ::ffff:7f00:1: IPv4-mapped IPv6 form of a loopback address \(only public/);
    const named = await post(client, `http://mapped.example:${receiver.port}/hook`);
    expect(!named.ok && named.detail).toMatch(/^mapped\.example resolves to ::ffff:127\.0\.0\.1; refused to connect to ::ffff:127\.0\.0\.1: IPv4-mapped IPv6 form of a loopback address \(/);
    for (const o of [out, named, await post(client, 'http://10.0.0.1/hook')]) expect(!o.ok && o.detail).not.toMatch(/address address/);
  });

  it('what tenants and models may be told names no address, name or socket error', async () => {
    const cases: [string, string][] = [
      [`http://localhost:${receiver.port}/hook`, 'blocked address (only public addresses are allowed)'],
      [`http://internal.example/hook`, 'blocked address (only public addresses are allowed)'],
      ['http://169.254.169.254/latest/meta-data/', 'blocked address (only public addresses are allowed)'],
      ['https://nowhere.invalid/hook', 'could not resolve the host name'],
      ['ftp://example.com/x', 'invalid URL'],
    ];
    for (const [url, reason] of cases) {
      const out = await post(client, url);
      expect(!out.ok && out.reason, url).toBe(reason);
    }
  });

  it('refuses a host name that resolves to loopback (localhost), after resolving it once', async () => {
    const out = await post(client, `http://localhost:${receiver.port}/hook`);
    expect(failure(out)).toBe('BLOCKED_ADDRESS');
    expect(!out.ok && out.detail).toMatch(/^localhost resolves to 127\.0\.0\.1; refused to connect to 127\.0\.0\.1: loopback address/);
    expect(lookups).toEqual(['localhost']);
  });

  it('refuses localhost through the system resolver too', async () => {
    const system = new WebhookHttpClient({ allowPrivate: false });
    try {
      const out = await post(system, `http://localhost:${receiver.port}/hook`);
      expect(failure(out)).toBe('BLOCKED_ADDRESS');
      expect(!out.ok && out.detail).toMatch(/^localhost resolves to (127\.0\.0\.1|::1); refused/);
    } finally {
      await system.close();
    }
  });

  it('refuses names that resolve to private, link-local or mapped-loopback addresses', async () => {
    for (const host of ['internal.example', 'metadata.example', 'mapped.example']) {
      expect(failure(await post(client, `http://${host}:${receiver.port}/hook`))).toBe('BLOCKED_ADDRESS');
    }
    expect(lookups).toEqual(['internal.example', 'metadata.example', 'mapped.example']);
  });

  it('reaches nothing: the receiver saw no request', () => {
    expect(receiver.requests).toHaveLength(0);
  });

  it('refuses other schemes and broken URLs', async () => {
    for (const url of ['ftp://example.com/x', 'file:///etc/passwd', 'javascript:alert(1)', 'not a url', 'http://']) {
      const out = await post(client, url);
      expect(failure(out)).toBe('INVALID_URL');
    }
  });

  it('a name that does not resolve is a DNS failure', async () => {
    const out = await post(client, 'https://nowhere.invalid/hook');
    expect(failure(out)).toBe('DNS_FAILED');
    expect(!out.ok && out.detail).toBe('could not resolve nowhere.invalid: ENOTFOUND');
  });
});

describe('outbound requests with WEBHOOK_ALLOW_PRIVATE on', () => {
  let receiver: Receiver;
  let other: Receiver;
  let client: WebhookHttpClient;
  const lookups: string[] = [];

  beforeAll(async () => {
    receiver = await startReceiver();
    other = await startReceiver();
    client = new WebhookHttpClient({
      allowPrivate: true,
      maxResponseBytes: 64 * 1024,
      resolve: async (host) => {
        lookups.push(host);
        if (host === 'hooks.test') return [{ address: '127.0.0.1', family: 4 }];
        throw Object.assign(new Error('nope'), { code: 'ENOTFOUND' });
      },
    });
  });
  afterAll(async () => {
    await client.close();
    await receiver.close();
    await other.close();
  });

  it('reaches a local receiver by 127.0.0.1', async () => {
    const out = await post(client, receiver.url);
    expect(out.ok && out.status).toBe(200);
    expect(receiver.requests.at(-1)!.method).toBe('POST');
  });

  it('connects to the address it resolved once (the Host header keeps the name)', async () => {
    lookups.length = 0;
    const out = await post(client, `http://hooks.test:${receiver.port}/named`);
    expect(out.ok && out.status).toBe(200);
    expect(lookups).toEqual(['hooks.test']);
    const got = receiver.requests.at(-1)!;
    expect(got.path).toBe('/named');
    expect(got.headers.host).toBe(`hooks.test:${receiver.port}`);
  });

  it('reaches localhost through the system resolver', async () => {
    const system = new WebhookHttpClient({ allowPrivate: true });
    try {
      const out = await post(system, `http://localhost:${receiver.port}/sys`);
      expect(out.ok && out.status).toBe(200);
      expect(receiver.requests.at(-1)!.path).toBe('/sys');
    } finally {
      await system.close();
    }
  });

  it('reaches [::1] when the machine has IPv6 loopback', async () => {
    if (!(await ipv6LoopbackWorks())) return;
    const v6 = await startReceiver({ host: '::1' });
    try {
      const out = await post(client, v6.url);
      expect(out.ok && out.status).toBe(200);
    } finally {
      await v6.close();
    }
  });

  it('does not follow redirects: a 301 is returned as is', async () => {
    receiver.script({ status: 301, headers: { location: other.url } });
    const out = await post(client, receiver.url);
    expect(out.ok && out.status).toBe(301);
    expect(other.requests).toHaveLength(0);
  });

  it('reads at most the body cap', async () => {
    receiver.script({ status: 200, body: 'x'.repeat(200 * 1024) });
    const out = await post(client, receiver.url);
    expect(out.ok).toBe(true);
    if (!out.ok) return;
    expect(out.bodyTooLarge).toBe(true);
    expect(out.body.length).toBe(64 * 1024);
    receiver.script({ status: 200, body: '{"ok":true}' });
    const small = await post(client, receiver.url);
    expect(small.ok && !small.bodyTooLarge && small.body).toBe('{"ok":true}');
  });

  it('times out a slow receiver at the deadline', async () => {
    receiver.script({ status: 200, delayMs: 1_500 });
    const out = await post(client, receiver.url, 200);
    expect(failure(out)).toBe('TIMEOUT');
    expect(!out.ok && out.reason).toBe('timed out: no complete answer within 0.2 s');
    expect(out.durationMs).toBeGreaterThanOrEqual(150);
    expect(out.durationMs).toBeLessThan(1_000);
  });

  it('times out a receiver that sends headers and then stalls the body', async () => {
    const stall = await startReceiver({ default: { status: 200, body: '{"results":', unfinished: true } });
    try {
      const out = await post(client, stall.url, 200);
      expect(failure(out)).toBe('TIMEOUT');
    } finally {
      await stall.close();
    }
  });

  it('a closed port is a connection failure', async () => {
    const out = await post(client, `http://127.0.0.1:${await closedPort()}/hook`);
    expect(failure(out)).toBe('CONNECTION_FAILED');
    expect(!out.ok && out.detail).toContain('ECONNREFUSED');
    expect(!out.ok && out.reason).toBe('connection failed');
  });

  it('a socket closed without an answer is a connection failure', async () => {
    receiver.script({ destroy: true });
    const out = await post(client, receiver.url);
    expect(failure(out)).toBe('CONNECTION_FAILED');
  });

  it('credentials in the URL become Basic auth and leave the URL', async () => {
    const url = receiver.url.replace('http://', 'http://user:p%40ss@');
    const out = await post(client, url);
    expect(out.ok && out.status).toBe(200);
    expect(receiver.requests.at(-1)!.headers.authorization).toBe(`Basic ${Buffer.from('user:p@ss').toString('base64')}`);
  });
});
