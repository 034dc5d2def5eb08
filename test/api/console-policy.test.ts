/** The console page's Content-Security-Policy: connections to its own origin only (docs/console.md). */
import { describe, expect, it } from 'vitest';
import { pagePolicy } from '../../src/api/console.js';

const connectSrc = (host: string | undefined) => /connect-src ([^;]*)/.exec(pagePolicy(host))![1];

describe('the console page policy', () => {
  it("allows the page's own host, by HTTP and WebSocket, and nothing else", () => {
    expect(connectSrc('switchboard.example.com')).toBe("'self' ws://switchboard.example.com wss://switchboard.example.com");
    expect(connectSrc('127.0.0.1:3000')).toBe("'self' ws://127.0.0.1:3000 wss://127.0.0.1:3000");
    expect(connectSrc('[::1]:3000')).toBe("'self' ws://[::1]:3000 wss://[::1]:3000");
  });

  it('a Host header that is no host adds nothing (no directive can be slipped in)', () => {
    for (const host of [undefined, '', 'a b', "evil.example; connect-src *", '*', 'x.example/path', "'unsafe-inline'"]) {
      expect(connectSrc(host)).toBe("'self'");
      expect(pagePolicy(host).split('; ')).toHaveLength(9);
    }
  });
});
