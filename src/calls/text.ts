/** Text on its way to speech: sentence splitting of streamed model output, pronunciations. */

/** Collects streamed text and hands out whole sentences as soon as they end. */
export class SentenceSplitter {
  private buffer = '';

  /** Adds text; returns the sentences completed by it. */
  push(text: string): string[] {
    this.buffer += text;
    const out: string[] = [];
    // a sentence ends at . ! ? … followed by whitespace (not inside numbers like 3.5)
    const re = /[.!?…]+["')\]]*\s+/g;
    let last = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(this.buffer)) !== null) {
      const end = m.index + m[0].length;
      const sentence = this.buffer.slice(last, end).trim();
      if (sentence.length >= 2) {
        out.push(sentence);
        last = end;
      }
    }
    this.buffer = this.buffer.slice(last);
    return out;
  }

  /** Whatever is left at the end of the stream. */
  flush(): string | null {
    const rest = this.buffer.trim();
    this.buffer = '';
    return rest === '' ? null : rest;
  }
}

export interface Pronunciation {
  from: string;
  to: string;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Applies `speech_config.pronunciation` to text that will be spoken (never to transcripts). */
export function applyPronunciations(text: string, rules: readonly Pronunciation[]): string {
  let out = text;
  for (const rule of rules) {
    const pattern = new RegExp(`(?<![\\p{L}\\p{N}])${escapeRegExp(rule.from)}(?![\\p{L}\\p{N}])`, 'gu');
    out = out.replace(pattern, rule.to);
  }
  return out;
}
