/**
 * Reads TwiML as the Twilio stand-in (./twilio.ts) follows it: the verbs under `<Response>`,
 * each with its attributes, its text and its nested nouns (`<Connect><Stream><Parameter>`).
 * A small XML reader: elements, attributes, text, the five predefined entities and numeric
 * character references; declarations and comments are skipped.
 */
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

export interface TwimlNode {
  name: string;
  attributes: Record<string, string>;
  children: TwimlNode[];
  /** The element's own text, entities decoded, trimmed. */
  text: string;
}

export class TwimlError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.TWIML_INVALID] as const;
  override name = 'TwimlError';
  constructor(message: string) {
    super(ErrorCodes.TWIML_INVALID, message);
  }
}

/** A Map, so that `&constructor;` stays as written, as any other unknown entity. */
const ENTITIES = new Map(Object.entries({ lt: '<', gt: '>', amp: '&', apos: "'", quot: '"' }));

const decode = (s: string) =>
  s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, name: string) => {
    if (name.startsWith('#x')) return String.fromCodePoint(parseInt(name.slice(2), 16));
    if (name.startsWith('#')) return String.fromCodePoint(parseInt(name.slice(1), 10));
    return ENTITIES.get(name) ?? whole;
  });

/** The `<Response>` element of a TwiML document; throws `TwimlError` when there is none. */
export function parseTwiml(xml: string): TwimlNode {
  const root: TwimlNode = { name: '#document', attributes: {}, children: [], text: '' };
  const stack: TwimlNode[] = [root];
  const tag = /<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<!\[CDATA\[([\s\S]*?)\]\]>|<(\/?)([A-Za-z_][\w.:-]*)((?:\s+[\w.:-]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>/g;
  let at = 0;
  for (let m = tag.exec(xml); m; m = tag.exec(xml)) {
    const top = stack[stack.length - 1]!;
    const between = xml.slice(at, m.index);
    if (between.includes('<')) throw new TwimlError(`unreadable TwiML near "${between.slice(0, 40)}"`);
    top.text += decode(between);
    at = tag.lastIndex;
    if (m[1] !== undefined) {
      top.text += m[1];
      continue;
    }
    const [, , closing, name, attrs, selfClosing] = m;
    if (!name) continue; // a comment or a declaration
    if (closing) {
      if (top.name !== name) throw new TwimlError(`</${name}> closes <${top.name}>`);
      top.text = top.text.trim();
      stack.pop();
      continue;
    }
    const node: TwimlNode = { name, attributes: {}, children: [], text: '' };
    for (const a of (attrs ?? '').matchAll(/([\w.:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) node.attributes[a[1]!] = decode(a[2] ?? a[3] ?? '');
    top.children.push(node);
    if (!selfClosing) stack.push(node);
  }
  if (xml.slice(at).includes('<')) throw new TwimlError('unreadable TwiML at the end');
  if (stack.length !== 1) throw new TwimlError(`<${stack[stack.length - 1]!.name}> is not closed`);
  const response = root.children.find((c) => c.name === 'Response');
  if (!response || root.children.length !== 1) throw new TwimlError('TwiML must have one <Response> root element');
  return response;
}
