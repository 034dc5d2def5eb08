/**
 * `npm run call -- --number <e164> --script <file>`: places a simulated inbound call over the
 * Twilio protocol against any running deployment, so a workflow can be tried without a phone.
 * The caller speaks with the sandbox voice, so the number's assistant must hear it with the
 * `sandbox` STT (or `sandbox-realtime`).
 *
 * Script: one step per line; blank lines and `#` comments are skipped.
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
import { parseScript } from '../sim/script.js';

const USAGE = `Usage: npm run call -- --number <E.164> --script <file>
  [--url http://127.0.0.1:3000] [--public-url <PUBLIC_URL of the server>]
  [--auth-token <Twilio auth token of the organization>] [--account-sid AC...] [--from +15005550006]
The auth token can also come from TWILIO_AUTH_TOKEN.`;

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      number: { type: 'string' },
      script: { type: 'string' },
      url: { type: 'string', default: 'http://127.0.0.1:3000' },
      'public-url': { type: 'string' },
      'auth-token': { type: 'string' },
      'account-sid': { type: 'string' },
      from: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const authToken = values['auth-token'] ?? process.env.TWILIO_AUTH_TOKEN;
  if (!values.number || !values.script || !authToken) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const steps = parseScript(readFileSync(values.script, 'utf8'));
  const call = new SimulatedCall({
    baseUrl: values.url!,
    to: values.number,
    authToken,
    ...(values['public-url'] ? { publicUrl: values['public-url'] } : {}),
    ...(values['account-sid'] ? { accountSid: values['account-sid'] } : {}),
    ...(values.from ? { from: values.from } : {}),
  });
  const started = Date.now();
  const stamp = () => `[${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s]`;
  let printed = 0;
  const printHeard = () => {
    for (; printed < call.heard.length; printed++) process.stdout.write(`${stamp()} assistant: ${call.heard[printed]!.text}\n`);
  };
  const ticker = setInterval(printHeard, 100);
  try {
    const outcome = await call.dial();
    if (outcome.kind === 'rejected') {
      process.stdout.write(`${stamp()} the call was rejected before pickup\n${call.twiml}\n`);
      return 1;
    }
    process.stdout.write(`${stamp()} connected (call ${outcome.callId})\n`);
    for (const step of steps) {
      switch (step.kind) {
        case 'expect':
          await call.hear(step.text, 30_000);
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
    process.stdout.write(`${stamp()} call over\n`);
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

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`call: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
