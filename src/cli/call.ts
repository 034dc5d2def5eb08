/**
 * `npm run call`: phone calls with no phone, against any running deployment.
 *
 * `npm run call -- --number <e164> --script <file>` places a simulated inbound call over the
 * Twilio protocol, so a workflow can be tried without a phone. The caller speaks with the sandbox
 * voice, so the number's assistant must hear it with the `sandbox` STT (or `sandbox-realtime`).
 *
 * `npm run call -- --web --assistant <id> [--workflow <id>] --script <file>` makes a web call
 * (`POST /calls/web`, docs/web-calls.md) with the API key in SWITCHBOARD_API_KEY (or --key) and
 * plays the script over its stream: a browser's call, from the terminal.
 *
 * `npm run call -- --standin` runs the Twilio stand-in (src/sim/twilio.ts) until Ctrl-C: a
 * Switchboard started with `TWILIO_API_BASE` at it places its outbound calls (`POST /calls`)
 * through it, and each is answered by a simulated callee. It prints a line when a call is placed
 * and, when the call is over, who answered, what the callee heard and said, and how it ended.
 * With `--carrier telnyx` it is the Telnyx stand-in (src/sim/telnyx.ts): `TELNYX_API_BASE` at it,
 * and the account's `telnyx.public_key` the one it prints.
 *
 * Script (the caller's, or with --standin a person callee's): one step per line; blank lines and
 * `#` comments are skipped.
 *   expect: <words the assistant should say>     (waits up to 30 s)
 *   say: <what the caller says>
 *   press: <digits>
 *   wait: <milliseconds>
 *   quiet                                         (waits until the assistant stops talking)
 *   hangup
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { SimulatedCall } from '../sim/caller.js';
import { WebCaller } from '../sim/web-caller.js';
import type { LegCaller } from '../sim/leg-caller.js';
import type { MediaLeg } from '../sim/media-leg.js';
import { parseScript, type ScriptStep } from '../sim/script.js';
import { startTwilioStandIn, type CalleeBehaviour, type StandInCall } from '../sim/twilio.js';
import { startTelnyxStandIn, type TelnyxCallee, type TelnyxStandInCall } from '../sim/telnyx.js';

const USAGE = `Usage:
  npm run call -- --number <E.164> --script <file>
    [--url http://127.0.0.1:3000] [--public-url <PUBLIC_URL of the server>]
    [--auth-token <Twilio auth token of the organization>] [--account-sid AC...] [--from +15005550006]
    [--key <API key>]
    Places a simulated inbound call to the number and plays the script as the caller.
    The auth token can also come from TWILIO_AUTH_TOKEN; with the API key (or SWITCHBOARD_API_KEY)
    it prints why the call ended, as the server recorded it.

  npm run call -- --web --assistant <id> [--workflow <id>] --script <file>
    [--url http://127.0.0.1:3000, or SWITCHBOARD_URL] [--key <API key>]
    Makes a web call (POST /calls/web) to the assistant, running the workflow if given, and
    plays the script as the browser would. The key can also come from SWITCHBOARD_API_KEY.

  npm run call -- --standin [--carrier twilio|telnyx] [--port 4010] [--host 127.0.0.1]
    [--callee person|voicemail|busy|no-answer|failed] [--script <file>] [--greeting <text>]
    Runs a Twilio stand-in until Ctrl-C: start Switchboard with TWILIO_API_BASE at it, and its
    outbound calls (POST /calls) reach a simulated callee (default: a person). A person plays
    --script, or listens, says "Thank you, goodbye." and hangs up; --greeting is the voicemail's.
    It takes any Twilio account SID and auth token. With --carrier telnyx, a Telnyx stand-in:
    start Switchboard with TELNYX_API_BASE at it, and give its account (PATCH /account, telnyx)
    the public key it prints, any API key and any connection id; numbers with provider telnyx.

Script: one step per line (expect: <words>, say: <words>, press: <digits>, wait: <ms>, quiet, hangup).`;

const CALLEES = ['person', 'voicemail', 'busy', 'no-answer', 'failed'] as const;
type CalleeKind = (typeof CALLEES)[number];

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      number: { type: 'string' },
      script: { type: 'string' },
      url: { type: 'string', default: process.env.SWITCHBOARD_URL || 'http://127.0.0.1:3000' },
      'public-url': { type: 'string' },
      'auth-token': { type: 'string' },
      'account-sid': { type: 'string' },
      from: { type: 'string' },
      standin: { type: 'boolean' },
      web: { type: 'boolean' },
      assistant: { type: 'string' },
      workflow: { type: 'string' },
      key: { type: 'string' },
      port: { type: 'string', default: '4010' },
      host: { type: 'string', default: '127.0.0.1' },
      callee: { type: 'string', default: 'person' },
      carrier: { type: 'string', default: 'twilio' },
      greeting: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.standin) {
    return runStandIn({
      carrier: values.carrier!,
      port: values.port!,
      host: values.host!,
      callee: values.callee!,
      script: values.script,
      greeting: values.greeting,
    });
  }
  if (values.web) {
    const key = values.key ?? process.env.SWITCHBOARD_API_KEY;
    if (!values.assistant || !values.script) return usageError('--web needs --assistant <id> and --script <file>');
    if (!key) return usageError('--web needs the API key: --key, or SWITCHBOARD_API_KEY');
    const steps = parseScript(readFileSync(values.script, 'utf8'));
    const call = new WebCaller({ baseUrl: values.url!, apiKey: key });
    let webCallId = '';
    return runScript(
      call,
      steps,
      async () => {
        webCallId = await call.start({ assistant_id: values.assistant!, ...(values.workflow ? { workflow_id: values.workflow } : {}) });
        return `web call ${webCallId}`;
      },
      // the stream's last message says how the call ended; the record adds its errors
      () => endedAs(values.url!, key, webCallId, call.events.find((e) => e.type === 'ended')?.ended_reason as string | undefined),
    );
  }
  const authToken = values['auth-token'] ?? process.env.TWILIO_AUTH_TOKEN;
  const { number, script } = values;
  if (!number || !script || !authToken) {
    const missing = [
      number ? null : '--number <E.164> (the number to call)',
      script ? null : '--script <file> (what the caller says)',
      authToken ? null : '--auth-token <the Twilio auth token set on the account>, or TWILIO_AUTH_TOKEN',
    ].filter((m): m is string => m !== null);
    return usageError(
      `missing: ${missing.join('; ')}` +
        (authToken ? '' : '\n(the server checks the call\'s Twilio signature with the account\'s auth token: PATCH /account {"telephony": {"twilio": …}})'),
    );
  }
  const steps = parseScript(readFileSync(script, 'utf8'));
  const call = new SimulatedCall({
    baseUrl: values.url!,
    to: number,
    authToken,
    ...(values['public-url'] ? { publicUrl: values['public-url'] } : {}),
    ...(values['account-sid'] ? { accountSid: values['account-sid'] } : {}),
    ...(values.from ? { from: values.from } : {}),
  });
  const key = values.key ?? process.env.SWITCHBOARD_API_KEY;
  let callId = '';
  return runScript(
    call,
    steps,
    async () => {
      const outcome = await call.dial();
      if (outcome.kind === 'rejected') throw new Error(`the call was rejected before pickup\n${call.twiml}`);
      callId = outcome.callId;
      return `call ${outcome.callId}`;
    },
    () => (key ? endedAs(values.url!, key, callId) : Promise.resolve('(give the API key, --key or SWITCHBOARD_API_KEY, to see why it ended)')),
  );
}

/**
 * Why the call ended, as the server recorded it (`GET /calls/{id}`: `ended_reason` and `errors`),
 * asked for a few seconds while the call is still being closed; `known` is what the call's own
 * stream said, if it said.
 */
async function endedAs(baseUrl: string, key: string, callId: string, known?: string): Promise<string> {
  if (!callId) return known ? `ended ${known}` : '';
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      const res = await fetch(`${baseUrl.replace(/\/$/, '')}/calls/${callId}`, { headers: { authorization: `Bearer ${key}` } });
      if (res.ok) {
        const { call } = (await res.json()) as { call: { status: string; ended_reason: string | null; errors: Array<string | { message: string }> } };
        if (call.status === 'ended' || Date.now() > deadline) {
          const reason = call.ended_reason ?? known ?? 'unknown';
          return `ended ${reason}${call.errors.length > 0 ? `; errors: ${call.errors.map((e) => (typeof e === 'string' ? e : e.message)).join('; ')}` : ''}`;
        }
      } else if (Date.now() > deadline || res.status === 401 || res.status === 403 || res.status === 404) {
        return known ? `ended ${known}` : `(GET /calls/${callId} answered ${res.status}: the reason is not known)`;
      }
    } catch (err) {
      return known ? `ended ${known}` : `(the reason is not known: ${(err as Error).message})`;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** What a script plays on: the simulated phone caller, or a web call's simulated browser. */
type ScriptedLine = Pick<LegCaller, 'heard' | 'hear' | 'say' | 'pressKey' | 'quiet' | 'hangUp' | 'ended' | 'closed' | 'close'>;

/**
 * Connects (`connect` names the call), plays the script, prints what was heard and said, and at
 * the end how the call ended (`ending`).
 */
async function runScript(
  call: ScriptedLine,
  steps: ScriptStep[],
  connect: () => Promise<string>,
  ending: () => Promise<string> = async () => '',
): Promise<number> {
  const started = Date.now();
  const stamp = () => `[${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s]`;
  let printed = 0;
  const printHeard = () => {
    for (; printed < call.heard.length; printed++) process.stdout.write(`${stamp()} assistant: ${call.heard[printed]!.text}\n`);
  };
  const ticker = setInterval(printHeard, 100);
  try {
    process.stdout.write(`${stamp()} connected (${await connect()})\n`);
    for (const step of steps) {
      switch (step.kind) {
        case 'expect':
          await call.hear(step.text, 30_000);
          // what was heard is printed before the next step's own line
          printHeard();
          break;
        case 'say':
          printHeard();
          process.stdout.write(`${stamp()} caller:    ${step.text}\n`);
          await call.say(step.text);
          break;
        case 'press':
          process.stdout.write(`${stamp()} caller presses ${step.digits}\n`);
          for (const d of step.digits) call.pressKey(d);
          break;
        case 'wait':
          await new Promise((r) => setTimeout(r, step.ms));
          break;
        case 'quiet':
          await call.quiet();
          break;
        case 'hangup':
          process.stdout.write(`${stamp()} caller hangs up\n`);
          await call.hangUp();
          break;
      }
    }
    if (!call.closed) await call.ended(60_000).catch(() => call.hangUp());
    printHeard();
    const how = await ending();
    process.stdout.write(`${stamp()} call over${how ? `: ${how}` : ''}\n`);
    return 0;
  } catch (err) {
    printHeard();
    process.stderr.write(`${stamp()} ${(err as Error).message}\n`);
    return 1;
  } finally {
    clearInterval(ticker);
    await call.close();
  }
}

// ------------------------------------------------------------------------------------------
// --standin: Twilio and the callees of outbound calls

interface StandInArgs {
  carrier: string;
  port: string;
  host: string;
  callee: string;
  script: string | undefined;
  greeting: string | undefined;
}

/** What a person callee says when it has no script. */
const GOODBYE = 'Thank you, goodbye.';
/** How long a call may go on after a person's script before the person hangs up. */
const AFTER_SCRIPT_MS = 60_000;

const clock = () => new Date().toTimeString().slice(0, 8);
const out = (line: string) => process.stdout.write(`[${clock()}] ${line}\n`);

async function runStandIn(args: StandInArgs): Promise<number> {
  const port = Number(args.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) return usageError(`--port must be a port number, not ${args.port}`);
  if (!(CALLEES as readonly string[]).includes(args.callee)) return usageError(`--callee must be one of ${CALLEES.join(', ')}, not ${args.callee}`);
  const kind = args.callee as CalleeKind;
  if (args.script !== undefined && kind !== 'person') return usageError('--script is for a person callee (--callee person)');
  if (args.greeting !== undefined && kind !== 'voicemail') return usageError("--greeting is the voicemail's (--callee voicemail)");
  if (args.carrier !== 'twilio' && args.carrier !== 'telnyx') return usageError(`--carrier must be twilio or telnyx, not ${args.carrier}`);
  const steps = args.script === undefined ? null : parseScript(readFileSync(args.script, 'utf8'));
  if (args.carrier === 'telnyx') return runTelnyxStandIn(args, kind, steps);

  const callee: CalleeBehaviour =
    kind === 'person'
      ? { kind: 'person', onAnswer: (leg, call) => playPerson(leg, call, steps) }
      : kind === 'voicemail'
        ? { kind: 'voicemail', ...(args.greeting !== undefined ? { greeting: args.greeting } : {}) }
        : { kind };
  const standIn = await startTwilioStandIn({ host: args.host, port, defaultCallee: callee }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'EADDRINUSE') throw new Error(`${args.host}:${port} is in use; choose another port with --port`);
    throw err;
  });
  const described = describeCallee(kind, args.script);
  process.stdout.write(
    [
      `Twilio stand-in on ${standIn.url}; every number it calls: ${described}`,
      `  Start Switchboard with TWILIO_API_BASE=${standIn.url} and give its account any Twilio`,
      `  account SID and auth token (PATCH /account); POST /calls then dials through here.`,
      '  Ctrl-C stops it.',
      '',
    ].join('\n'),
  );

  // the stand-in keeps every call it places, in order: each new one gets a watcher
  let seen = 0;
  const poller = setInterval(() => {
    for (; seen < standIn.calls.length; seen++) {
      const call = standIn.calls[seen]!;
      watchCall(call).catch((err: unknown) => out(`call ${call.sid}: ${(err as Error).message}`));
    }
  }, 50);

  const signal = await stopped();
  clearInterval(poller);
  const live = standIn.calls.filter((c) => !c.final).length;
  process.stdout.write(`\n${signal}: stopping the stand-in${live > 0 ? ` (${live} call${live === 1 ? '' : 's'} still going, cut off with no callbacks)` : ''}\n`);
  await standIn.close();
  return 0;
}

function describeCallee(kind: CalleeKind, script: string | undefined): string {
  return {
    person: script !== undefined ? `a person playing ${script}` : 'a person',
    voicemail: 'a voicemail',
    busy: 'a busy line',
    'no-answer': 'nobody answers (it rings out)',
    failed: 'a call the carrier fails',
  }[kind];
}

const stopped = () =>
  new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });

/** `--standin --carrier telnyx`: the Telnyx stand-in, its calls printed as the Twilio one's are. */
async function runTelnyxStandIn(args: StandInArgs, kind: CalleeKind, steps: ScriptStep[] | null): Promise<number> {
  const port = Number(args.port);
  const callee: TelnyxCallee =
    kind === 'person'
      ? { kind: 'person', onAnswer: (leg, call) => playPerson(leg, call, steps) }
      : kind === 'voicemail'
        ? { kind: 'voicemail', ...(args.greeting !== undefined ? { greeting: args.greeting } : {}) }
        : { kind };
  const standIn = await startTelnyxStandIn({ host: args.host, port, defaultCallee: callee }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'EADDRINUSE') throw new Error(`${args.host}:${port} is in use; choose another port with --port`);
    throw err;
  });
  process.stdout.write(
    [
      `Telnyx stand-in on ${standIn.url}; every number it calls: ${describeCallee(kind, args.script)}`,
      `  Start Switchboard with TELNYX_API_BASE=${standIn.url} and give its account (PATCH /account)`,
      `  telnyx: {"api_key": <any>, "public_key": "${standIn.publicKey}", "connection_id": <any>};`,
      '  POST /calls from a number with provider telnyx then dials through here. Ctrl-C stops it.',
      '',
    ].join('\n'),
  );
  let seen = 0;
  const poller = setInterval(() => {
    for (; seen < standIn.calls.length; seen++) {
      const call = standIn.calls[seen]!;
      watchTelnyxCall(call).catch((err: unknown) => out(`call ${call.callControlId}: ${(err as Error).message}`));
    }
  }, 50);
  const signal = await stopped();
  clearInterval(poller);
  const live = standIn.calls.filter((c) => !c.final).length;
  process.stdout.write(`\n${signal}: stopping the stand-in${live > 0 ? ` (${live} call${live === 1 ? '' : 's'} still going, cut off with no webhooks)` : ''}\n`);
  await standIn.close();
  return 0;
}

/** A Telnyx call when it is placed and, once it is over, how it went. */
async function watchTelnyxCall(call: TelnyxStandInCall): Promise<void> {
  const amd = call.params.answering_machine_detection;
  out(`call ${call.callControlId} to ${call.to} from ${call.from}${typeof amd === 'string' ? ` (answering-machine detection: ${amd})` : ''}`);
  await call.waitFor((c) => c.final, Number.POSITIVE_INFINITY, 'the end of the call');
  await Promise.all(call.legs.map((leg) => leg.until(() => leg.closed, 5_000).catch(() => undefined)));
  const answered = call.answeredAt !== null;
  const who = answered ? `answered by ${call.callee?.kind === 'voicemail' ? 'a voicemail' : 'a person'}` : 'not answered';
  const seconds = answered ? ` after ${Math.ceil(((call.endedAt ?? Date.now()) - call.answeredAt!) / 1000)} s` : '';
  const by = { callee: call.callee?.kind === 'voicemail' ? ', the voicemail hung up' : ', the callee hung up', carrier: ', Switchboard hung up', server: ', Switchboard closed the stream', local: '' }[call.leg?.endedBy ?? 'local'];
  const errors = call.errors.length > 0 ? `; errors: ${call.errors.join('; ')}` : '';
  out(`call ${call.callControlId} to ${call.to} ${who}; ended ${call.hangupCause ?? 'unknown'}${seconds}${by}${errors}`);
  for (const line of conversation(call)) process.stdout.write(`    ${line}\n`);
}

function usageError(message: string): number {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  return 2;
}

/** Prints the call when it is placed and, once it is over, how it went. */
async function watchCall(call: StandInCall): Promise<void> {
  const detection = call.params.get('MachineDetection');
  out(`call ${call.sid} to ${call.to} from ${call.from}${detection ? ` (answering-machine detection: ${detection})` : ''}`);
  await call.waitFor((c) => c.final, Number.POSITIVE_INFINITY, 'the end of the call');
  // the ears finish hearing a moment after the stream closes
  await Promise.all(call.legs.map((leg) => leg.until(() => leg.closed, 5_000).catch(() => undefined)));
  out(describeEnd(call));
  for (const line of conversation(call)) process.stdout.write(`    ${line}\n`);
}

function describeEnd(call: StandInCall): string {
  const answered = call.startedAt !== null;
  const who = !answered
    ? 'not answered'
    : `answered by ${call.callee?.kind === 'voicemail' ? 'a voicemail' : 'a person'}${call.answeredBy ? ` (AnsweredBy ${call.answeredBy})` : ''}`;
  const how = answered ? `${call.status} after ${call.durationSeconds} s${endedBy(call)}` : call.status;
  const errors = call.errors.length > 0 ? `; errors: ${call.errors.join('; ')}` : '';
  return `call ${call.sid} to ${call.to} ${who}; ended ${how}${errors}`;
}

function endedBy(call: StandInCall): string {
  const by = call.leg?.endedBy;
  if (by === 'callee') return call.callee?.kind === 'voicemail' ? ', the voicemail hung up' : ', the callee hung up';
  if (by === 'server') return ', Switchboard hung up';
  if (by === 'carrier') return ', Switchboard ended it through the REST API';
  return '';
}

/** A call of either stand-in, as far as the conversation printed goes. */
type StandInLine = StandInCall | TelnyxStandInCall;

/** Keys a person callee pressed, by call (a leg notes what it says, not its key presses). */
const pressed = new WeakMap<StandInLine, Array<{ at: number; digits: string }>>();

/** What was said on the call, in order: what the callee heard (or its voicemail recorded), said and pressed. */
function conversation(call: StandInLine): string[] {
  const lines: Array<{ at: number; text: string }> = [];
  const line = (at: number, label: string, text: string) => lines.push({ at, text: `${`${label}:`.padEnd(10)}${text}` });
  const voicemail = call.voicemail;
  for (const leg of call.legs) {
    // after the beep, what a voicemail hears is its recording (listed below)
    for (const h of leg.heard) if (!voicemail?.beepEndedAt || h.at < voicemail.beepEndedAt) line(h.at, 'heard', h.text);
    for (const s of leg.spoken) if (s.text && s.startedAt > 0) line(s.startedAt, voicemail ? 'played' : 'said', s.text);
  }
  for (const p of pressed.get(call) ?? []) line(p.at, 'pressed', p.digits);
  for (const r of voicemail?.recorded ?? []) line(r.at, 'recorded', r.text);
  return lines.sort((a, b) => a.at - b.at).map((l) => l.text);
}

/** A person callee: plays the script, or listens, says goodbye, listens, and hangs up; always within a bound. */
async function playPerson(leg: MediaLeg, call: StandInLine, steps: ScriptStep[] | null): Promise<void> {
  let finished = false;
  try {
    if (steps) await playScript(leg, call, steps);
    else await sayGoodbye(leg);
    finished = true;
  } catch (err) {
    out(`call ${'sid' in call ? call.sid : call.callControlId}: ${steps ? 'the script stopped' : 'the callee gave up'}: ${(err as Error).message}`);
  }
  if (leg.closed) return;
  // after a script, the call may go on (the assistant ends it) for a while; otherwise the callee hangs up now
  if (steps && finished) await leg.until(() => leg.closed, AFTER_SCRIPT_MS, 'the end of the call').catch(() => undefined);
  if (!leg.closed) await leg.hangUp().catch(() => undefined);
}

async function sayGoodbye(leg: MediaLeg): Promise<void> {
  // the assistant speaks first: wait for it, then for it to finish
  await leg.until(() => leg.heard.length > 0 || leg.closed, 20_000, 'the assistant to speak').catch(() => undefined);
  await leg.quiet(1_000, 60_000);
  if (leg.closed) return;
  await leg.say(GOODBYE);
  const before = leg.heard.length;
  await leg.until(() => leg.heard.length > before || leg.closed, 10_000, 'an answer').catch(() => undefined);
  await leg.quiet(1_000, 30_000);
}

async function playScript(leg: MediaLeg, call: StandInLine, steps: ScriptStep[]): Promise<void> {
  for (const step of steps) {
    if (leg.closed) return;
    switch (step.kind) {
      case 'expect':
        await leg.hear(step.text, 30_000);
        break;
      case 'say':
        await leg.say(step.text);
        break;
      case 'press':
        pressed.set(call, [...(pressed.get(call) ?? []), { at: Date.now(), digits: step.digits }]);
        for (const d of step.digits) leg.pressKey(d);
        break;
      case 'wait':
        await new Promise((r) => setTimeout(r, step.ms));
        break;
      case 'quiet':
        await leg.quiet();
        break;
      case 'hangup':
        await leg.hangUp();
        break;
    }
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`call: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
