/** Environment → configuration: the retention settings, and where call recordings are kept. */
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

describe('RECORDING_RETENTION_DAYS', () => {
  const days = (value?: string) =>
    loadConfig(value === undefined ? {} : { RECORDING_RETENTION_DAYS: value }).RECORDING_RETENTION_DAYS;

  it('defaults to 30 days (also when empty); 0 keeps recordings forever', () => {
    expect(days()).toBe(30);
    expect(days('')).toBe(30);
    expect(days('0')).toBe(0);
    expect(days('7')).toBe(7);
  });

  it.each([
    ['-1', 'RECORDING_RETENTION_DAYS: must not be negative; 0 keeps recordings forever'],
    ['2.5', 'RECORDING_RETENTION_DAYS: must be a whole number of days; 0 keeps recordings forever'],
  ])('refuses %j with a message that names the variable and the rule', (value, message) => {
    expect(() => days(value)).toThrow(`Invalid configuration:\n  ${message}`);
  });
});

describe('RECORDINGS_S3_URL', () => {
  const url = (value?: string) => loadConfig(value === undefined ? {} : { RECORDINGS_S3_URL: value }).RECORDINGS_S3_URL;

  it('is unset by default (recordings stay in DATA_DIR/recordings), also when empty', () => {
    expect(url()).toBeUndefined();
    expect(url('')).toBeUndefined();
  });

  it('keeps a valid URL as it is: AWS S3, or an S3-compatible endpoint', () => {
    const aws = 's3://AKIAEXAMPLE:wJalr%2FXUtnFEMI@acme-recordings/switchboard?region=eu-west-1';
    expect(url(aws)).toBe(aws);
    const minio = 's3://minio:minio-secret@recordings?endpoint=http://127.0.0.1:9000';
    expect(url(minio)).toBe(minio);
  });

  it.each([
    ['https://AKIAEXAMPLE:TopSecret42@acme-recordings', 'RECORDINGS_S3_URL: must start with s3://, e.g. s3://my-recordings/calls?region=eu-west-1'],
    ['s3:///calls', 'RECORDINGS_S3_URL: names no bucket: s3://BUCKET/optional/prefix'],
    [
      's3://AKIAEXAMPLE:TopSecret42@acme-recordings?endpoint=minio:9000',
      'RECORDINGS_S3_URL: has an endpoint that is not an http:// or https:// URL with a host and nothing after the path, e.g. endpoint=http://127.0.0.1:9000',
    ],
    [
      's3://AKIAEXAMPLE:Top/Secret42@acme-recordings',
      'RECORDINGS_S3_URL: is not a valid URL; the format is s3://[ACCESS_KEY_ID:SECRET@]bucket[/prefix][?region=us-east-1&endpoint=https://host:port&force_path_style=true|false] (percent-encode / : @ # ? in the key id and secret, e.g. / as %2F)',
    ],
  ])('refuses %s at start-up, naming the variable, never showing the secret', (value, message) => {
    let error: unknown;
    try {
      url(value);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(`Invalid configuration:\n  ${message}`);
    expect((error as Error).message).not.toMatch(/TopSecret42|Top\/Secret42/);
  });
});
