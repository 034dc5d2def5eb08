/**
 * `{{name}}` variables (DECISIONS 12): the built-ins, given values over built-ins, the
 * substitution (unknown names left as written, one pass), every field of the assistant and the
 * workflow it reaches and none it must not, and inputs never changed. Properties with fast-check.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { effectiveAssistant, type AssistantFields } from '../../engine/assistant.js';
import { hashDefinition } from '../../engine/compile.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import {
  VARIABLE_NAME_PATTERN,
  applyVariablesToAssistant,
  applyVariablesToDefinition,
  builtInVariables,
  resolveVariables,
  substitute,
} from '../../engine/variables.js';

/** Frozen all the way down: a write to the input throws instead of passing unnoticed. */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

const NOW = new Date('2025-06-01T23:30:05.123Z');

describe('builtInVariables', () => {
  it('gives every built-in that has a value', () => {
    expect(
      builtInVariables({
        businessName: 'Acme Dental',
        customer: { number: '+14155550100', name: 'Ada Lovelace' },
        phoneNumber: { number: '+14155550123' },
        call: { id: 'c0ffee00-0000-4000-8000-000000000001', type: 'outbound_phone_call' },
        now: NOW,
      }),
    ).toEqual({
      business_name: 'Acme Dental',
      'customer.number': '+14155550100',
      'customer.name': 'Ada Lovelace',
      'phone_number.number': '+14155550123',
      'call.id': 'c0ffee00-0000-4000-8000-000000000001',
      'call.type': 'outbound_phone_call',
      now: '2025-06-01T23:30:05.123Z',
      today: '2025-06-01',
    });
  });

  it('leaves out the ones with no value (null, missing or empty), so they stay as written', () => {
    const values = builtInVariables({
      businessName: null,
      customer: { number: '+14155550100', name: null },
      phoneNumber: null,
      call: { id: 'chat-1', type: 'chat' },
      now: NOW,
    });
    expect(values).toEqual({ 'customer.number': '+14155550100', 'call.id': 'chat-1', 'call.type': 'chat', now: NOW.toISOString(), today: '2025-06-01' });
    expect(builtInVariables({ businessName: '', customer: { name: '' }, call: { id: 'x', type: 'chat' }, now: NOW })).not.toHaveProperty('business_name');
    expect(substitute('Hi {{customer.name}} from {{business_name}}', values)).toBe('Hi {{customer.name}} from {{business_name}}');
  });

  it('now and today are UTC, whatever the offset the Date was made with', () => {
    const values = builtInVariables({ call: { id: 'x', type: 'web_call' }, now: new Date('2025-12-31T20:00:00-05:00') });
    expect(values.now).toBe('2026-01-01T01:00:00.000Z');
    expect(values.today).toBe('2026-01-01');
  });
});

describe('resolveVariables', () => {
  const builtIns = { business_name: 'Acme', 'call.type': 'chat', now: NOW.toISOString() };

  it('given values win over built-ins of the same name; the rest of both stay', () => {
    expect(resolveVariables(builtIns, { business_name: 'Acme Night Desk', order: 'A-1' })).toEqual({
      business_name: 'Acme Night Desk',
      'call.type': 'chat',
      now: NOW.toISOString(),
      order: 'A-1',
    });
  });

  it('numbers and booleans become text as String() writes them', () => {
    expect(resolveVariables({}, { n: 42, x: 1.5, neg: -0.25, t: true, f: false, zero: 0 })).toEqual({
      n: '42',
      x: '1.5',
      neg: '-0.25',
      t: 'true',
      f: 'false',
      zero: '0',
    });
  });

  it('no given values: the built-ins (a copy)', () => {
    expect(resolveVariables(builtIns)).toEqual(builtIns);
    expect(resolveVariables(builtIns, null)).toEqual(builtIns);
    expect(resolveVariables(builtIns, null)).not.toBe(builtIns);
  });
});

describe('substitute', () => {
  const values = { name: 'Ada', 'customer.name': 'Grace', 'order-id': 'A-1', _x: 'under', v2: 'two' };

  it('replaces {{name}}, with or without spaces or tabs inside the braces, every time it occurs', () => {
    expect(substitute('Hello {{name}}!', values)).toBe('Hello Ada!');
    expect(substitute('Hello {{ name }} and {{\tname\t}} and {{  name}}', values)).toBe('Hello Ada and Ada and Ada');
    expect(substitute('{{name}}{{name}}', values)).toBe('AdaAda');
    expect(substitute('{{customer.name}}, order {{order-id}}, {{_x}} {{v2}}', values)).toBe('Grace, order A-1, under two');
  });

  it('an unknown name is left exactly as written, spaces included', () => {
    expect(substitute('Dear {{ nobody }}, {{name}}', values)).toBe('Dear {{ nobody }}, Ada');
    expect(substitute('{{Name}}', values)).toBe('{{Name}}'); // names are case-sensitive
  });

  it('what is not a placeholder is left as written', () => {
    for (const text of ['{{}}', '{{ }}', '{{1st}}', '{{.name}}', '{{-name}}', '{{na me}}', '{{name}', '{name}}', '{{\nname\n}}', '{{name!}}', '{ {name} }']) {
      expect(substitute(text, values), text).toBe(text);
    }
  });

  it('names of Object.prototype are not values', () => {
    expect(substitute('{{constructor}} {{toString}} {{__proto__}} {{hasOwnProperty}}', values)).toBe(
      '{{constructor}} {{toString}} {{__proto__}} {{hasOwnProperty}}',
    );
    expect(substitute('{{constructor}}', { constructor: 'given' })).toBe('given');
  });

  it('one pass: a value holding {{x}} is not expanded again', () => {
    expect(substitute('{{a}} {{b}}', { a: '{{b}}', b: '{{a}}' })).toBe('{{b}} {{a}}');
    expect(substitute('{{a}}', { a: '{{a}}' })).toBe('{{a}}');
  });

  it('braces around a placeholder stay around its value', () => {
    expect(substitute('{{{name}}}', values)).toBe('{Ada}');
    expect(substitute('{{{{name}}}}', values)).toBe('{{Ada}}');
    // so a value that is itself a name can form a new placeholder, which one pass leaves alone
    const chain = { a: 'b', b: 'c' };
    expect(substitute('{{{{a}}}}', chain)).toBe('{{b}}');
    expect(substitute(substitute('{{{{a}}}}', chain), chain)).toBe('c');
  });

  it('values are put in literally ($& and $1 are not replacement patterns)', () => {
    expect(substitute('Pay {{amount}}', { amount: '$& $1 $$' })).toBe('Pay $& $1 $$');
  });

  it('the name rule: what the API accepts is what a placeholder can name', () => {
    for (const name of ['a', '_', 'customer.name', 'order-id', 'A'.repeat(64)]) expect(VARIABLE_NAME_PATTERN.test(name), name).toBe(true);
    for (const name of ['', '1st', '.a', '-a', 'a b', 'a{', 'A'.repeat(65), 'é']) expect(VARIABLE_NAME_PATTERN.test(name), name).toBe(false);
  });
});

describe('applyVariablesToAssistant', () => {
  const fields: AssistantFields = {
    name: 'Receptionist {{name}}',
    business_name: '{{business_name}} Inc',
    first_message: 'Hello {{name}}, this is {{business_name}}.',
    voicemail_message: 'Sorry we missed you, {{name}}.',
    recording_consent: { enabled: true, message: '{{business_name}} records this call.' },
    llm_config: {
      provider: 'sandbox',
      messages: [
        { role: 'system', content: 'You work for {{business_name}}. Today is {{today}}.' },
        { role: 'assistant', content: 'Order {{order}} noted.' },
      ],
      tools: [{ name: 'lookup', description: 'look up {{order}}' }],
    },
    tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
    speech_config: {
      end_call_message: 'Bye {{name}}.',
      first_message_outbound: 'Hi {{name}}, {{business_name}} calling.',
      silence: { messages: ['{{name}}, are you there?', 'Still there?'], final_message: 'Goodbye {{name}}.' },
      pronunciation: [{ from: '{{name}}', to: 'ay-da' }],
    },
    analysis_plan: {
      structured_data_plan: { enabled: true, schema: { type: 'object' }, messages: [{ role: 'system', content: 'Extract: {{schema}} {{name}}' }] },
    },
  };
  const values = { name: 'Ada', business_name: 'Acme', today: '2025-06-01', order: 'A-1', schema: 'NOT THIS' };

  it('substitutes every line and prompt DECISIONS 12 lists', () => {
    const out = applyVariablesToAssistant(effectiveAssistant(fields), values);
    expect(out.first_message).toBe('Hello Ada, this is Acme.');
    expect(out.speech_config.first_message_outbound).toBe('Hi Ada, Acme calling.');
    expect(out.voicemail_message).toBe('Sorry we missed you, Ada.');
    expect(out.speech_config.end_call_message).toBe('Bye Ada.');
    expect(out.speech_config.silence.messages).toEqual(['Ada, are you there?', 'Still there?']);
    expect(out.speech_config.silence.final_message).toBe('Goodbye Ada.');
    expect(out.recording_consent).toEqual({ enabled: true, message: 'Acme records this call.' });
    expect(out.llm_config.messages).toEqual([
      { role: 'system', content: 'You work for Acme. Today is 2025-06-01.' },
      { role: 'assistant', content: 'Order A-1 noted.' },
    ]);
  });

  it('leaves everything else as it was: names, tools, pronunciations, the analysis plan and its {{schema}}', () => {
    const template = effectiveAssistant(fields);
    const out = applyVariablesToAssistant(template, values);
    expect(out.name).toBe('Receptionist {{name}}');
    expect(out.business_name).toBe('{{business_name}} Inc');
    expect(out.llm_config.tools).toEqual(template.llm_config.tools);
    expect(out.speech_config.pronunciation).toEqual([{ from: '{{name}}', to: 'ay-da' }]);
    expect(out.analysis_plan).toEqual(template.analysis_plan);
    expect(out.speech_config.turn_taking).toEqual(template.speech_config.turn_taking);
    expect({ ...out, first_message: null, voicemail_message: null, recording_consent: null, llm_config: null, speech_config: null }).toEqual({
      ...template,
      first_message: null,
      voicemail_message: null,
      recording_consent: null,
      llm_config: null,
      speech_config: null,
    });
  });

  it('defaults and unset lines: null stays null, platform lines without placeholders unchanged', () => {
    const plain = effectiveAssistant({ name: 'Plain', tts_config: { provider: 'sandbox', voice_id: 'sandbox' } });
    const out = applyVariablesToAssistant(plain, values);
    expect(out).toEqual(plain);
    expect(out.first_message).toBeNull();
    expect(out.voicemail_message).toBeNull();
    expect(out.speech_config.first_message_outbound).toBeNull();
    expect(out.llm_config.messages).toBeUndefined();
  });

  it('never changes the assistant it was given', () => {
    const template = deepFreeze(effectiveAssistant(fields));
    const before = structuredClone(template);
    const out = applyVariablesToAssistant(template, values);
    expect(template).toEqual(before);
    expect(out).not.toBe(template);
    expect(out.speech_config.silence.messages).not.toBe(template.speech_config.silence.messages);
  });
});

describe('applyVariablesToDefinition', () => {
  const definition = (): WorkflowDefinition => ({
    version: 1,
    entry_node: 'greeting',
    global_prompt: 'You are the front desk of {{business_name}}.',
    nodes: [
      {
        id: 'greeting',
        type: 'conversation',
        first_line: 'Hello {{name}}!',
        instructions: 'Ask {{name}} about order {{order}}.',
        llm_config: { provider: 'sandbox', messages: [{ role: 'user', content: 'I am {{name}}' }] },
      },
      { id: 'billing', type: 'conversation', global: true, global_description: 'questions about {{order}}' },
      {
        id: 'lookup',
        type: 'tool',
        tool_name: 'crm_fetch',
        url: 'https://tools.example.com/{{order}}',
        first_line: 'Checking {{order}}.',
        arguments: { order: '{{order}}', who: 'Customer {{ name }}', priority: 2, rush: false, note: null, unknown: '{{nope}}' },
      },
      { id: 'agent', type: 'transfer', destination: '+14155550123', first_line: 'Putting you through, {{name}}.' },
      { id: 'bye', type: 'end', first_line: 'Goodbye {{name}}.' },
      { id: 'quiet', type: 'end' },
    ],
    edges: [
      { from: 'greeting', to: 'lookup', description: 'the caller asks about {{order}}', message: 'Let me look up {{order}}.' },
      { from: 'lookup', to: 'bye' },
      { from: 'greeting', to: 'agent', description: 'wants a person' },
      { from: 'billing', to: 'quiet', description: 'done' },
    ],
  });
  const values = { business_name: 'Acme', name: 'Ada', order: 'A-1' };

  it('substitutes global_prompt, instructions, first lines, edge messages, node llm_config messages and tool arguments', () => {
    const out = applyVariablesToDefinition(definition(), values);
    expect(out.global_prompt).toBe('You are the front desk of Acme.');
    expect(out.nodes[0]).toEqual({
      id: 'greeting',
      type: 'conversation',
      first_line: 'Hello Ada!',
      instructions: 'Ask Ada about order A-1.',
      llm_config: { provider: 'sandbox', messages: [{ role: 'user', content: 'I am Ada' }] },
    });
    expect(out.nodes[2]).toMatchObject({
      first_line: 'Checking A-1.',
      arguments: { order: 'A-1', who: 'Customer Ada', priority: 2, rush: false, note: null, unknown: '{{nope}}' },
    });
    expect(out.nodes[3]).toMatchObject({ first_line: 'Putting you through, Ada.', destination: '+14155550123' });
    expect(out.nodes[4]).toEqual({ id: 'bye', type: 'end', first_line: 'Goodbye Ada.' });
    expect(out.edges[0]).toEqual({ from: 'greeting', to: 'lookup', description: 'the caller asks about {{order}}', message: 'Let me look up A-1.' });
  });

  it('leaves ids, descriptions, urls and the rest as written, and adds no field that was absent', () => {
    const out = applyVariablesToDefinition(definition(), values);
    expect(out.nodes[1]).toEqual({ id: 'billing', type: 'conversation', global: true, global_description: 'questions about {{order}}' });
    expect(out.nodes[2]).toMatchObject({ url: 'https://tools.example.com/{{order}}', tool_name: 'crm_fetch' });
    expect(out.nodes[5]).toEqual({ id: 'quiet', type: 'end' });
    expect(Object.keys(out.nodes[5]!)).toEqual(['id', 'type']);
    expect(out.edges.slice(1)).toEqual(definition().edges.slice(1));
    expect(Object.keys(out.edges[1]!)).toEqual(['from', 'to']);
    const noPrompt = applyVariablesToDefinition({ ...definition(), global_prompt: undefined as never }, values);
    expect(noPrompt.global_prompt).toBeUndefined();
  });

  it('tool arguments: string values anywhere inside objects and arrays; keys untouched', () => {
    const nested = definition();
    const tool = nested.nodes[2] as Extract<WorkflowDefinition['nodes'][number], { type: 'tool' }>;
    // the schema takes scalars only today; the walk does not depend on it
    (tool as { arguments: unknown }).arguments = {
      '{{order}}': { list: ['{{name}}', 3, { deep: '#{{order}}' }], flag: true },
      plain: 'no placeholders',
    };
    const out = applyVariablesToDefinition(deepFreeze(nested), values);
    expect((out.nodes[2] as { arguments: unknown }).arguments).toEqual({
      '{{order}}': { list: ['Ada', 3, { deep: '#A-1' }], flag: true },
      plain: 'no placeholders',
    });
  });

  it('never changes the definition it was given', () => {
    const template = deepFreeze(definition());
    const before = structuredClone(template);
    const out = applyVariablesToDefinition(template, values);
    expect(template).toEqual(before);
    expect(out).not.toBe(template);
    expect(out.nodes).not.toBe(template.nodes);
  });

  it('with nothing to substitute the definition is equal to the template (and compiles to the same hash)', () => {
    const template = definition();
    expect(applyVariablesToDefinition(template, {})).toEqual(template);
    expect(hashDefinition(applyVariablesToDefinition(template, { unrelated: 'x' }))).toBe(hashDefinition(template));
    expect(hashDefinition(applyVariablesToDefinition(template, values))).not.toBe(hashDefinition(template));
  });
});

// ---------------------------------------------------------------------------------------------
// Properties

/** Texts rich in braces, spaces and name characters, so that placeholders (and near misses) are common. */
const braceText = fc
  .array(fc.constantFrom('{', '{{', '}', '}}', ' ', '\t', 'a', 'b', 'ab', '.', '-', '_', '1', 'x', '{{a}}', '{{ b }}', '$&', 'é'), { maxLength: 30 })
  .map((parts) => parts.join(''));
const anyText = fc.oneof(fc.string({ maxLength: 60 }), braceText);
const name = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_.-]{0,8}$/);
const nameOrShort = fc.oneof(name, fc.constantFrom('a', 'b', 'ab', 'x'));

describe('properties', () => {
  it('substitution with no values is the identity', () => {
    fc.assert(fc.property(anyText, (text) => substitute(text, {}) === text));
  });

  it('a text without "{{" is untouched, whatever the values', () => {
    const noOpen = anyText.filter((t) => !t.includes('{{'));
    fc.assert(fc.property(noOpen, fc.dictionary(nameOrShort, fc.string()), (text, values) => substitute(text, values) === text));
  });

  it('applying twice with the same values is applying once, when no value has braces or is itself a name with a value', () => {
    // `{{{{a}}}}` with a = "b" gives `{{b}}`: a second pass would expand it if b had a value
    const valueText = fc.string({ maxLength: 12 }).filter((v) => !/[{}]/.test(v));
    const values = fc
      .dictionary(nameOrShort, valueText, { maxKeys: 6 })
      .filter((vs) => Object.values(vs).every((v) => !Object.hasOwn(vs, v.replace(/^[ \t]+|[ \t]+$/g, ''))));
    fc.assert(
      fc.property(anyText, values, (text, vs) => {
        const once = substitute(text, vs);
        expect(substitute(once, vs)).toBe(once);
      }),
    );
  });

  it('a placeholder with a value never survives, and an unknown one always does', () => {
    fc.assert(
      fc.property(name, name, fc.string({ maxLength: 10 }).filter((v) => !v.includes('{')), (known, unknown, value) => {
        fc.pre(known !== unknown);
        const out = substitute(`<{{${known}}}|{{ ${unknown} }}>`, { [known]: value });
        expect(out).toBe(`<${value}|{{ ${unknown} }}>`);
      }),
    );
  });

  it('definitions: with no values the result equals the input, and the input is never changed', () => {
    const def = (texts: string[]): WorkflowDefinition => ({
      version: 1,
      entry_node: 'n',
      global_prompt: texts[0]!,
      nodes: [
        { id: 'n', type: 'conversation', first_line: texts[1]!, instructions: texts[2]! },
        { id: 't', type: 'tool', tool_name: 'tool', url: 'https://example.com', arguments: { a: texts[3]!, b: 1 } },
      ],
      edges: [{ from: 'n', to: 't', description: 'go', message: texts[4]! }],
    });
    fc.assert(
      fc.property(fc.array(anyText, { minLength: 5, maxLength: 5 }), fc.dictionary(nameOrShort, fc.string({ maxLength: 8 })), (texts, vs) => {
        const template = deepFreeze(def(texts));
        expect(applyVariablesToDefinition(template, {})).toEqual(template);
        applyVariablesToDefinition(template, vs);
        expect(template).toEqual(def(texts));
      }),
    );
  });
});
