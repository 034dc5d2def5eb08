/**
 * The one error root (src/errors.ts, engine/errors.ts): every error class of src/ and engine/
 * extends `SwitchboardError` and names its stable codes; the codes are unique constants; a
 * call's `errors` entries read old string entries; `ended_reason` derives from the entry.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  callError,
  callErrorFrom,
  CallRejectCodes,
  endedReasonFor,
  ErrorCodes,
  readCallErrors,
  SwitchboardError,
  type CallError,
} from '../src/errors.js';
import { ProviderError } from '../src/providers/types.js';
import { TwilioRestError } from '../src/telephony/twilio/rest.js';
import { SipTransferError } from '../src/telephony/sip/errors.js';

const root = fileURLToPath(new URL('..', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

const files = [...sources('engine'), ...sources('src')].sort();
/** Entry points run (and exit) when imported: read, not imported. */
const entryPoint = (f: string) => f === 'src/main.ts' || f.startsWith('src/cli/');

type ErrorClass = (abstract new (...args: never[]) => Error) & { codes?: readonly string[] };

async function exportedErrorClasses(): Promise<Map<string, ErrorClass>> {
  const found = new Map<string, ErrorClass>();
  for (const file of files.filter((f) => !entryPoint(f))) {
    const mod = (await import(pathToFileURL(join(root, file)).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(mod)) {
      if (typeof value === 'function' && value.prototype instanceof Error) found.set(`${file}:${name}`, value as ErrorClass);
    }
  }
  return found;
}

describe('one error root', () => {
  it('every exported error class of src/ and engine/ extends SwitchboardError and names its codes', async () => {
    const classes = await exportedErrorClasses();
    // the walk found the classes it is about (a broken walk must not pass by finding none)
    for (const known of ['ProviderError', 'TwilioRestError', 'ChatError', 'ApiError', 'InUseError', 'WebhookVerificationError', 'CallSessionError', 'WorkflowCompileError']) {
      expect([...classes.keys()].some((k) => k.endsWith(`:${known}`)), known).toBe(true);
    }
    const codes = new Set<string>(Object.values(ErrorCodes));
    const owner = new Map<string, string>();
    for (const [where, cls] of classes) {
      if (cls === SwitchboardError) continue; // the root (re-exported by src/errors.ts)
      expect(cls.prototype instanceof SwitchboardError, `${where} extends SwitchboardError`).toBe(true);
      if (where.endsWith(':EngineError')) continue; // the engine's base: its subclasses name the codes
      const own = Object.hasOwn(cls, 'codes') ? cls.codes ?? [] : [];
      expect(own.length, `${where} names its codes (static codes)`).toBeGreaterThan(0);
      for (const code of own) {
        expect(codes.has(code), `${where}: ${code} is in ErrorCodes`).toBe(true);
        // a code belongs to one class (re-exports of the same class are one)
        const first = owner.get(code);
        if (first && classes.get(first) !== cls) throw new Error(`${code} is claimed by ${first} and ${where}`);
        owner.set(code, where);
      }
    }
  });

  it('no class in src/ or engine/ but the root extends Error itself (entry points and unexported classes too)', () => {
    // an interface may extend Error (the pg driver's errors), a class may not
    const offenders = files.filter((f) => /class (?!SwitchboardError\b)\w+ extends Error\b/.test(readFileSync(join(root, f), 'utf8')));
    expect(offenders).toEqual([]);
    expect(readFileSync(join(root, 'engine/errors.ts'), 'utf8')).toMatch(/export class SwitchboardError extends Error\b/);
  });

  it('codes are unique constants: each key is its own value, upper snake case, never two alike', () => {
    expect(Object.isFrozen(ErrorCodes)).toBe(true);
    for (const [key, value] of Object.entries(ErrorCodes)) {
      expect(value).toBe(key);
      expect(value).toMatch(/^[A-Z][A-Z0-9_]*$/);
    }
    expect(new Set(Object.values(ErrorCodes)).size).toBe(Object.values(ErrorCodes).length);
    for (const code of Object.values(CallRejectCodes)) expect(Object.values(ErrorCodes)).toContain(code);
  });

  it('an instance carries its code, keeps its name, message and matching by class', () => {
    const err = new ProviderError('PROVIDER_TIMEOUT', 'deepgram', 'no answer in 5 s');
    expect(err).toBeInstanceOf(SwitchboardError);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: 'PROVIDER_TIMEOUT', provider: 'deepgram', name: 'ProviderError', message: 'no answer in 5 s' });
    expect(new TwilioRestError('refused', 400)).toMatchObject({ code: 'TWILIO_REST_ERROR', provider: 'twilio', status: 400 });
    expect(new SipTransferError('sip: refused', 501)).toMatchObject({ code: 'SIP_TRANSFER_REFUSED', provider: 'sip', status: 501 });
  });
});

describe("a call's errors", () => {
  it('old entries stored as strings read as UNKNOWN with the sentence as message; new ones as they are', () => {
    const stored: unknown = [
      'elevenlabs: quota exceeded',
      { code: 'PROVIDER_AUTH', message: 'deepgram: invalid API key', provider: 'deepgram' },
      { code: 'CALL_SHUTDOWN', message: 'the server shut down' },
      { message: 'an entry without a code' },
      42,
      null,
    ];
    expect(readCallErrors(stored)).toEqual([
      { code: 'UNKNOWN', message: 'elevenlabs: quota exceeded' },
      { code: 'PROVIDER_AUTH', message: 'deepgram: invalid API key', provider: 'deepgram' },
      { code: 'CALL_SHUTDOWN', message: 'the server shut down' },
      { code: 'UNKNOWN', message: 'an entry without a code' },
    ]);
    expect(readCallErrors(undefined)).toEqual([]);
    expect(readCallErrors(null)).toEqual([]);
  });

  it('an entry from a thrown error takes its code and provider, else the fallback', () => {
    expect(callErrorFrom(new ProviderError('PROVIDER_HTTP_ERROR', 'openai-tts', 'HTTP 500'), 'PROVIDER_PROTOCOL', { message: 'openai-tts: HTTP 500' })).toEqual({
      code: 'PROVIDER_HTTP_ERROR',
      message: 'openai-tts: HTTP 500',
      provider: 'openai-tts',
    });
    expect(callErrorFrom(new Error('REFER answered 501'), 'TRANSFER_FAILED', { provider: 'sip' })).toEqual({ code: 'TRANSFER_FAILED', message: 'REFER answered 501', provider: 'sip' });
    expect(callErrorFrom(new TwilioRestError('No international permission'), 'TRANSFER_FAILED', { message: 'transfer: No international permission', provider: 'web' })).toEqual({
      code: 'TWILIO_REST_ERROR',
      message: 'transfer: No international permission',
      provider: 'twilio',
    });
  });
});

describe('ended_reason from the error (DECISIONS 7 and 8)', () => {
  const cases: Array<[CallError, string]> = [
    [callError('PROVIDER_TIMEOUT', 'deepgram: no answer', 'deepgram'), 'pipeline-error-deepgram'],
    [callError('PROVIDER_HTTP_ERROR', 'openai-tts: HTTP 500', 'openai-tts'), 'pipeline-error-openai-tts'],
    [callError('PROVIDER_PROTOCOL', 'openai: bad chunk', 'openai'), 'pipeline-error-openai'],
    [callError('PROVIDER_NO_ADAPTER', 'custom-llm: no llm adapter', 'custom-llm'), 'pipeline-error-custom-llm'],
    [callError('CALL_INTERNAL_ERROR', 'switchboard: internal error (media out.sendFrame)'), 'pipeline-error-switchboard'],
    [callError('CALL_REJECTED_REALTIME_OVERRIDE', 'CALL_REJECTED_REALTIME_OVERRIDE: nodes[0]…'), 'rejected-at-start'],
    [callError('CALL_REJECTED_MISSING_PROVIDER_KEY', 'CALL_REJECTED_MISSING_PROVIDER_KEY: …'), 'rejected-at-start'],
    [callError('CALL_REJECTED_MISSING_ADAPTER', 'llm_config.provider: no adapter for "x"'), 'rejected-at-start'],
    [callError('CALL_REJECTED_UNKNOWN_ASSISTANT', "the number's assistant no longer exists"), 'rejected-at-start'],
    [callError('ASSISTANT_REQUEST_REJECTED', 'assistant-request: We are closed'), 'rejected-at-start'],
    [callError('ASSISTANT_REQUEST_FAILED', 'assistant-request: no answer within 5 s'), 'assistant-request-failed'],
    [callError('DIAL_FAILED', 'twilio: the call failed (31005)', 'twilio'), 'dial-failed'],
    [callError('CALL_START_FAILED', 'sip: no RTP port', 'sip'), 'call-start-error-sip'],
  ];
  it.each(cases)('%o ends %s', (error, reason) => {
    expect(endedReasonFor(error)).toBe(reason);
  });

  it('a refused SIP REFER and a refused Twilio transfer end the same way, each naming its carrier', () => {
    const twilio = callErrorFrom(new TwilioRestError('Twilio answered 400'), 'TRANSFER_FAILED', { provider: 'twilio' });
    const sip = callErrorFrom(new SipTransferError('sip: REFER answered 501 Not Implemented', 501), 'TRANSFER_FAILED', { provider: 'sip' });
    expect([endedReasonFor(twilio), endedReasonFor(sip)]).toEqual(['pipeline-error-twilio', 'pipeline-error-sip']);
    // a transport's transfer that throws a plain error is put down to the call's carrier
    expect(endedReasonFor(callErrorFrom(new Error('socket closed'), 'TRANSFER_FAILED', { provider: 'sip' }))).toBe('pipeline-error-sip');
  });
});
