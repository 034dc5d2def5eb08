/** What the caller heard of a realtime response cut after part of its audio had played. */
import { describe, expect, it } from 'vitest';
import { heardShare } from '../../src/calls/playout.js';

describe('heardShare', () => {
  it('keeps the whole words played', () => {
    expect(heardShare('Hello there, how are you?', 0, 1000)).toBe('');
    expect(heardShare('Hello there, how are you?', 1000, 1000)).toBe('Hello there, how are you?');
    expect(heardShare('Hello there, how are you?', 500, 1000)).toBe('Hello there,');
    expect(heardShare('Hello there', 100, 0)).toBe('');
  });
});

