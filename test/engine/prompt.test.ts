import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  assignTransitionNames,
  buildModelContext,
  compileWorkflow,
  FUNCTION_NAME_PATTERN,
  WorkflowDefinition,
} from '../../engine/index.js';

const LONG = 'a'.repeat(60);

function definition(): WorkflowDefinition {
  return WorkflowDefinition.parse({
    version: 1,
    entry_node: 'start',
    global_prompt: 'You work for Acme.',
    nodes: [
      { id: 'start', type: 'conversation', instructions: 'Greet the caller.' },
      { id: 'billing', type: 'conversation', instructions: 'Billing questions only.' },
      { id: `${LONG}_x1`, type: 'conversation', instructions: 'One.' },
      { id: `${LONG}_x2`, type: 'conversation', instructions: 'Two.' },
      { id: 'check', type: 'tool', tool_name: 'check_account', url: 'https://t.example.com/check' },
      {
        id: 'faq',
        type: 'conversation',
        global: true,
        global_description: 'The caller asks a general question.',
        instructions: 'Answer general questions.',
      },
      {
        id: 'agent',
        type: 'conversation',
        global: true,
        global_description: 'The caller wants a person.',
      },
      { id: 'bye', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'billing', description: 'The caller asks about a bill.' },
      { from: 'start', to: `${LONG}_x1`, description: 'One.' },
      { from: 'start', to: `${LONG}_x2`, description: 'Two.' },
      { from: 'billing', to: 'check', description: 'Check the account.' },
      { from: 'check', to: 'bye', description: 'The account is fine.' },
      { from: 'check', to: 'billing', description: 'The account has a problem.' },
      { from: 'faq', to: 'start', description: 'Back to the start.' },
      { from: 'agent', to: 'bye', description: 'Done.' },
    ],
  });
}

describe('transition function names', () => {
  it('are go_to_<target>, safe for OpenAI, and unique even for long similar ids', () => {
    const context = buildModelContext(compileWorkflow(definition()), 'start');
    const names = context.transitionFunctions.map((f) => f.name);
    expect(names[0]).toBe('go_to_billing');
    for (const name of names) expect(name).toMatch(FUNCTION_NAME_PATTERN);
    expect(new Set(names).size).toBe(names.length);
    expect(names[1]).toHaveLength(64);
    expect(names[2]).toHaveLength(64);
  });

  it('are always valid and distinct for any targets and reserved names', () => {
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/), { maxLength: 30 }),
        fc.array(fc.stringMatching(/^go_to_[A-Za-z0-9_]{1,10}$/), { maxLength: 5 }),
        (targets, reserved) => {
          const names = assignTransitionNames(targets, new Set(reserved));
          expect(names).toHaveLength(targets.length);
          for (const name of names) {
            expect(name).toMatch(FUNCTION_NAME_PATTERN);
            expect(reserved).not.toContain(name);
          }
          expect(new Set(names).size).toBe(names.length);
        },
      ),
    );
  });

  it('sanitize characters a definition from elsewhere might carry', () => {
    expect(assignTransitionNames(['a b.c', 'a b.c'])).toEqual(['go_to_a_b_c', 'go_to_a_b_c_2']);
  });
});

describe('buildModelContext', () => {
  it('a conversation node: global prompt + its own instructions, edges then global nodes', () => {
    const context = buildModelContext(compileWorkflow(definition()), 'billing');
    expect(context.mode).toBe('conversation');
    expect(context.system).toBe('You work for Acme.\n\nBilling questions only.');
    expect(context.system).not.toMatch(/Greet|general questions|One\./);
    expect(context.transitionFunctions).toEqual([
      { name: 'go_to_check', description: 'Check the account.', target: 'check', edge_index: 3 },
      { name: 'go_to_faq', description: 'The caller asks a general question.', target: 'faq', global: true },
      { name: 'go_to_agent', description: 'The caller wants a person.', target: 'agent', global: true },
    ]);
    expect(context.tools).toEqual([]);
  });

  it('a global node does not offer itself, but offers the other global nodes', () => {
    const context = buildModelContext(compileWorkflow(definition()), 'faq');
    expect(context.transitionFunctions.map((f) => f.target)).toEqual(['start', 'agent']);
    expect(context.system).toBe('You work for Acme.\n\nAnswer general questions.');
  });

  it('without a global prompt or instructions the prompt is what there is', () => {
    const d = definition();
    delete d.global_prompt;
    const compiled = compileWorkflow(d);
    expect(buildModelContext(compiled, 'start').system).toBe('Greet the caller.');
    expect(buildModelContext(compiled, 'agent').system).toBe('');
  });

  it("a tool node: choose among the tool's edges only, without the assistant's tools", () => {
    const tools = [{ name: 'lookup_weather' }];
    const context = buildModelContext(compileWorkflow(definition()), 'check', { tools });
    expect(context.mode).toBe('tool_choice');
    expect(context.system).toContain('You work for Acme.');
    expect(context.system).toContain('check_account');
    expect(context.transitionFunctions.map((f) => f.target)).toEqual(['bye', 'billing']);
    expect(context.tools).toEqual([]);
  });

  it("passes the assistant's tools through and renames transitions that would clash", () => {
    const tools = [{ name: 'go_to_check', description: 'clashes' }, { name: 'weather' }];
    const context = buildModelContext(compileWorkflow(definition()), 'billing', { tools });
    expect(context.tools).toEqual(tools);
    const names = context.transitionFunctions.map((f) => f.name);
    expect(names).not.toContain('go_to_check');
    expect(names[0]).toBe('go_to_check_2');
  });

  it('shares one frozen context per node when no tools are given', () => {
    const compiled = compileWorkflow(definition());
    const a = buildModelContext(compiled, 'start');
    expect(buildModelContext(compiled, 'start')).toBe(a);
    expect(Object.isFrozen(a.transitionFunctions)).toBe(true);
    expect(() => buildModelContext(compiled, 'nope')).toThrow(RangeError);
  });
});
