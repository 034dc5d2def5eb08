/** The caller simulator's script: one step per line (see src/cli/call.ts). */

export type ScriptStep =
  | { kind: 'expect'; text: string }
  | { kind: 'say'; text: string }
  | { kind: 'press'; digits: string }
  | { kind: 'wait'; ms: number }
  | { kind: 'quiet' }
  | { kind: 'hangup' };

export function parseScript(source: string): ScriptStep[] {
  const steps: ScriptStep[] = [];
  source.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const [head, ...rest] = line.split(':');
    const verb = head!.trim().toLowerCase();
    const arg = rest.join(':').trim();
    const where = `line ${i + 1}`;
    if (verb === 'expect' || verb === 'say') {
      if (!arg) throw new Error(`${where}: "${verb}" needs text`);
      steps.push({ kind: verb, text: arg });
    } else if (verb === 'press') {
      if (!/^[0-9*#]+$/.test(arg)) throw new Error(`${where}: "press" takes digits, * and #`);
      steps.push({ kind: 'press', digits: arg });
    } else if (verb === 'wait') {
      const ms = Number(arg);
      if (!Number.isFinite(ms) || ms < 0) throw new Error(`${where}: "wait" takes milliseconds`);
      steps.push({ kind: 'wait', ms });
    } else if (verb === 'quiet' || verb === 'hangup') {
      steps.push({ kind: verb });
    } else {
      throw new Error(`${where}: unknown step "${verb}" (expect, say, press, wait, quiet, hangup)`);
    }
  });
  return steps;
}
