/**
 * The trunk guard's counts, on its own clock: refusals and unanswered digest challenges shun a
 * source, a trunk (a source whose INVITE was taken) never is, and the windows start again.
 */
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { TrunkGuard } from '../../src/telephony/sip/trunk-guard.js';

const guard = () => new TrunkGuard(pino({ level: 'silent' }));
const T0 = 1_000_000;

describe('trunk guard', () => {
  it('a source that draws 50 digest challenges within 60 s is shunned for 60 s', () => {
    const g = guard();
    for (let i = 0; i < 49; i++) g.noteChallenge('192.0.2.1', T0 + i * 1_000);
    expect(g.shunned('192.0.2.1', T0 + 49_000)).toBe(false);
    g.noteChallenge('192.0.2.1', T0 + 49_000);
    expect(g.shunned('192.0.2.1', T0 + 49_000)).toBe(true);
    expect(g.shunned('192.0.2.1', T0 + 49_000 + 59_999)).toBe(true);
    expect(g.shunned('192.0.2.1', T0 + 49_000 + 60_000)).toBe(false);
    // another source is not affected
    expect(g.shunned('192.0.2.2', T0 + 49_000)).toBe(false);
  });

  it('challenges spread over more than the window start counting again', () => {
    const g = guard();
    for (let i = 0; i < 49; i++) g.noteChallenge('192.0.2.1', T0 + i * 100);
    for (let i = 0; i < 49; i++) g.noteChallenge('192.0.2.1', T0 + 61_000 + i * 100);
    expect(g.shunned('192.0.2.1', T0 + 70_000)).toBe(false);
  });

  it('a trunk that answers its challenge is trusted: its count goes, and its challenges never shun it', () => {
    const g = guard();
    for (let i = 0; i < 40; i++) g.noteChallenge('192.0.2.1', T0);
    g.trust('192.0.2.1');
    const now = Date.now();
    for (let i = 0; i < 200; i++) g.noteChallenge('192.0.2.1', now);
    expect(g.shunned('192.0.2.1', now)).toBe(false);
  });

  it('refusals shun as before: 50 within 10 s', () => {
    const g = guard();
    for (let i = 0; i < 49; i++) g.noteRefusal('192.0.2.3', T0 + i * 100);
    expect(g.shunned('192.0.2.3', T0 + 5_000)).toBe(false);
    g.noteRefusal('192.0.2.3', T0 + 5_000);
    expect(g.shunned('192.0.2.3', T0 + 5_000)).toBe(true);
  });
});
