import { describe, expect, it } from 'vitest';
import { parseScript } from '../../src/sim/script.js';

describe('caller script', () => {
  it('reads every step, skipping blank lines and comments', () => {
    expect(
      parseScript('# a call\nexpect: Acme Dental\n\nsay: I want to book: Tuesday\npress: 12#\nwait: 500\nquiet\nhangup\n'),
    ).toEqual([
      { kind: 'expect', text: 'Acme Dental' },
      { kind: 'say', text: 'I want to book: Tuesday' },
      { kind: 'press', digits: '12#' },
      { kind: 'wait', ms: 500 },
      { kind: 'quiet' },
      { kind: 'hangup' },
    ]);
  });

  it('names the line of a bad step', () => {
    expect(() => parseScript('say: hi\nshout: HI')).toThrow('line 2: unknown step "shout"');
    expect(() => parseScript('press: abc')).toThrow('line 1: "press" takes digits');
    expect(() => parseScript('say:')).toThrow('line 1: "say" needs text');
    expect(() => parseScript('wait: soon')).toThrow('line 1: "wait" takes milliseconds');
  });
});
