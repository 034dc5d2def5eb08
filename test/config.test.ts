/** Environment → configuration: the delivery-attempt retention setting. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

const retention = (value?: string) =>
  loadConfig(value === undefined ? {} : { WEBHOOK_DELIVERY_RETENTION_DAYS: value }).WEBHOOK_DELIVERY_RETENTION_DAYS;

describe('WEBHOOK_DELIVERY_RETENTION_DAYS', () => {
  it('defaults to 30 days (also when empty); 0 (keep forever) and whole numbers of days are read', () => {
    expect(retention()).toBe(30);
    expect(retention('')).toBe(30);
    expect(retention('0')).toBe(0);
    expect(retention('7')).toBe(7);
    expect(retention('36500')).toBe(36_500);
  });

  it.each([
    ['-1', 'WEBHOOK_DELIVERY_RETENTION_DAYS: must not be negative; 0 keeps delivery attempts forever'],
    ['1.5', 'WEBHOOK_DELIVERY_RETENTION_DAYS: must be a whole number of days; 0 keeps delivery attempts forever'],
    ['thirty', 'WEBHOOK_DELIVERY_RETENTION_DAYS: must be a whole number of days; 0 keeps delivery attempts forever'],
    ['36501', 'WEBHOOK_DELIVERY_RETENTION_DAYS: must be at most 36500 days (100 years); 0 keeps delivery attempts forever'],
  ])('refuses %j with a message that names the variable and the rule', (value, message) => {
    expect(() => retention(value)).toThrow(ConfigError);
    expect(() => retention(value)).toThrow(`Invalid configuration:\n  ${message}`);
  });
});
