// The editor's side panel: every field of the selected node by its type, of the selected edge,
// or of the workflow itself; the API's problems beside the fields they name.
import { useEffect, useState } from 'preact/hooks';
import { html } from '../html.js';
import { Checkbox, ConfirmButton, Field, Select, TextArea, TextInput } from '../ui.js';

export const NODE_TYPES = ['conversation', 'tool', 'transfer', 'end'];
const COMMON = ['id', 'type', 'first_line', 'llm_config', 'tts_config', 'stt_config'];
/** The fields each type takes (DECISIONS 3); any other field is kept as it is, under "Other fields". */
export const TYPE_FIELDS = {
  conversation: [...COMMON, 'instructions', 'global', 'global_description'],
  tool: [...COMMON, 'tool_name', 'url', 'arguments'],
  transfer: [...COMMON, 'destination'],
  end: COMMON,
};
const OVERRIDES = [
  ['llm_config', 'Model override (llm_config)', 'e.g. {"provider": "openai", "model": "gpt-4o"}: this node only'],
  ['tts_config', 'Voice override (tts_config)', 'e.g. {"provider": "elevenlabs", "voice_id": "…"}'],
  ['stt_config', 'Transcriber override (stt_config)', 'e.g. {"provider": "deepgram", "language": "fr"}'],
];

/** JSON in a textarea: the value changes only when the text parses; empty is no value. */
export function JsonField({ label, path, error, value, onChange, hint, rows = 3, placeholder }) {
  const shown = (v) => (v === undefined ? '' : JSON.stringify(v, null, 2));
  const [text, setText] = useState(shown(value));
  const [bad, setBad] = useState(null);
  useEffect(() => {
    // another value from outside (another node chosen, a revert): shown as it is
    let same = false;
    try {
      same = text.trim() !== '' && JSON.stringify(JSON.parse(text)) === JSON.stringify(value);
    } catch {
      same = false;
    }
    if (!same && !(text.trim() === '' && value === undefined)) {
      setText(shown(value));
      setBad(null);
    }
  }, [JSON.stringify(value)]);
  const onInput = (t) => {
    setText(t);
    if (t.trim() === '') {
      setBad(null);
      return onChange(undefined);
    }
    try {
      const v = JSON.parse(t);
      setBad(null);
      return onChange(v);
    } catch (err) {
      return setBad(`not valid JSON yet (${err.message.replace(/^JSON\.parse: /, '')}); the last valid value is kept`);
    }
  };
  return html`<${Field} label=${label} path=${path} error=${error} hint=${hint} extra=${bad ? [bad] : []} wide>
    ${({ id, describedBy }) => html`<${TextArea} id=${id} class="mono" rows=${rows} aria-describedby=${describedBy} value=${text} onInput=${onInput} placeholder=${placeholder} spellcheck="false" />`}
  <//>`;
}

/** The node's id, changed when the field is left or Enter pressed (edges and layout follow). */
function IdField({ node, error, onRename }) {
  const [text, setText] = useState(node.id);
  useEffect(() => setText(node.id), [node.id]);
  const commit = () => text !== node.id && onRename(text);
  return html`<${Field} label="Node id" path="id" error=${error} hint="1 to 64 of A-Z, a-z, 0-9, _ and -">
    ${({ id, describedBy }) => html`<input id=${id} name="node-id" aria-describedby=${describedBy} value=${text} onInput=${(e) => setText(e.currentTarget.value)} onBlur=${commit} onKeyDown=${(e) => e.key === 'Enter' && (e.preventDefault(), commit())} />`}
  <//>`;
}

export function NodeInspector({ node, definition, error, onChange, onRename, onType, onDelete, onEntry, onConnect, onAddEdge }) {
  const set = (field) => (v) => onChange({ [field]: v === '' ? undefined : v });
  const known = TYPE_FIELDS[node.type] ?? COMMON;
  const others = Object.fromEntries(Object.entries(node).filter(([k]) => !known.includes(k)));
  const [target, setTarget] = useState('');
  const targets = definition.nodes.filter((n) => n.id !== node.id && !definition.edges.some((e) => e.from === node.id && e.to === n.id));
  useEffect(() => setTarget(targets[0]?.id ?? ''), [node.id, definition.edges.length]);
  const text = (field, label, opts = {}) => html`<${Field} label=${label} path=${field} error=${error} hint=${opts.hint} wide=${!!opts.rows}>
    ${({ id, describedBy }) =>
      opts.rows
        ? html`<${TextArea} id=${id} name=${field} rows=${opts.rows} aria-describedby=${describedBy} value=${node[field]} onInput=${set(field)} placeholder=${opts.placeholder} />`
        : html`<${TextInput} id=${id} name=${field} aria-describedby=${describedBy} value=${node[field]} onInput=${set(field)} placeholder=${opts.placeholder} />`}
  <//>`;
  return html`<div class="inspector" id="inspector" data-node=${node.id}>
    <h2>Node <code>${node.id}</code></h2>
    ${(error?.nodeProblems ?? []).length ? html`<ul class="problems" role="alert">${error.nodeProblems.map((d) => html`<li>${d}</li>`)}</ul>` : null}
    <${IdField} node=${node} error=${error} onRename=${onRename} />
    <${Field} label="Type" path="type" error=${error}>${({ id }) => html`<${Select} id=${id} name="type" value=${node.type} options=${NODE_TYPES.map((t) => [t, t])} onChange=${onType} />`}<//>
    <${Checkbox} label="The entry node: calls start here" checked=${definition.entry_node === node.id} disabled=${definition.entry_node === node.id} onChange=${() => onEntry(node.id)} />
    ${text('first_line', 'First line', { rows: 2, hint: 'said as the call enters the node', placeholder: 'Hello, how can I help?' })}
    ${node.type === 'conversation'
      ? html`${text('instructions', 'Instructions', { rows: 4, hint: "the model's instructions in this node" })}
          <${Checkbox} label="Global: reachable from every conversation node" checked=${node.global} onChange=${(v) => onChange({ global: v || undefined })} />
          ${node.global ? text('global_description', 'When to go here (global_description)', { rows: 2 }) : null}`
      : null}
    ${node.type === 'tool'
      ? html`${text('tool_name', 'Tool name', { placeholder: 'find_slot' })}
          ${text('url', 'URL', { placeholder: 'https://tools.example.com/find-slot' })}
          <${JsonField} label="Arguments" path="arguments" error=${error} value=${node.arguments} onChange=${set('arguments')} hint='a JSON object of strings, numbers, booleans or null, e.g. {"day": "monday"}' rows="2" />`
      : null}
    ${node.type === 'transfer' ? text('destination', 'Destination', { placeholder: '+14155550123', hint: 'an E.164 number' }) : null}
    <details class="overrides" open=${OVERRIDES.some(([f]) => node[f] !== undefined)}>
      <summary>Overrides of the assistant in this node</summary>
      ${OVERRIDES.map(([f, label, hint]) => html`<${JsonField} label=${label} path=${f} error=${error} value=${node[f]} onChange=${set(f)} hint=${hint} rows="2" />`)}
    </details>
    ${Object.keys(others).length
      ? html`<${JsonField} label="Other fields" path="__others" error=${error} value=${others} hint="fields this editor has no form for, kept as they are" onChange=${(v) => onChange({ ...Object.fromEntries(Object.keys(others).map((k) => [k, undefined])), ...(v ?? {}) })} />`
      : null}
    <div class="edge-add">
      <h3>Edges out</h3>
      <ul class="edges-out">${definition.edges.map((e, i) => (e.from === node.id ? html`<li>→ ${e.to}${e.description ? html` <span class="hint">${e.description}</span>` : null}</li>` : null))}</ul>
      <div class="buttons">
        <label class="sr-only" for="edge-target">Connect to</label>
        <select id="edge-target" value=${target} onChange=${(e) => setTarget(e.currentTarget.value)} disabled=${!targets.length}>
          ${targets.map((n) => html`<option value=${n.id}>${n.id}</option>`)}
        </select>
        <button type="button" id="add-edge" disabled=${!target} onClick=${() => onAddEdge(node.id, target)}>Add edge</button>
        <button type="button" id="connect-node" class="quiet" onClick=${() => onConnect(node.id)}>Connect on the graph…</button>
      </div>
    </div>
    <div class="buttons end"><button type="button" id="delete-node" class="danger" onClick=${() => onDelete(node.id)}>Delete node</button></div>
  </div>`;
}

export function EdgeInspector({ edge, index, definition, error, onChange, onDelete }) {
  const ids = definition.nodes.map((n) => [n.id, n.id]);
  const set = (field) => (v) => onChange({ [field]: v === '' ? undefined : v });
  return html`<div class="inspector" id="inspector" data-edge=${index}>
    <h2>Edge <code>${edge.from} → ${edge.to}</code></h2>
    ${(error?.nodeProblems ?? []).length ? html`<ul class="problems" role="alert">${error.nodeProblems.map((d) => html`<li>${d}</li>`)}</ul>` : null}
    <${Field} label="From" path="from" error=${error}>${({ id }) => html`<${Select} id=${id} name="from" value=${edge.from} options=${ids} onChange=${set('from')} />`}<//>
    <${Field} label="To" path="to" error=${error}>${({ id }) => html`<${Select} id=${id} name="to" value=${edge.to} options=${ids} onChange=${set('to')} />`}<//>
    <${Field} label="Description: when the call takes this edge" path="description" error=${error} wide hint="what the model reads to decide, e.g. the caller wants to book an appointment">
      ${({ id, describedBy }) => html`<${TextArea} id=${id} name="description" rows="2" aria-describedby=${describedBy} value=${edge.description} onInput=${set('description')} />`}
    <//>
    <${Field} label="Message: said as the call takes it" path="message" error=${error} wide hint="optional, e.g. Sure thing.">
      ${({ id, describedBy }) => html`<${TextArea} id=${id} name="message" rows="2" aria-describedby=${describedBy} value=${edge.message} onInput=${set('message')} />`}
    <//>
    <div class="buttons end"><${ConfirmButton} id="delete-edge" onConfirm=${onDelete} confirmLabel="Delete this edge?">Delete edge<//></div>
  </div>`;
}

export function WorkflowInspector({ draft, error, onChange }) {
  const def = draft.definition;
  return html`<div class="inspector" id="inspector" data-workflow>
    <h2>Workflow</h2>
    <${Field} label="Name" path="name" error=${error}>${({ id, describedBy }) => html`<${TextInput} id=${id} name="name" aria-describedby=${describedBy} value=${draft.name} onInput=${(v) => onChange({ name: v })} maxlength="200" />`}<//>
    <${Checkbox} label="Active: numbers run it (inactive: their assistant alone)" checked=${draft.is_active} onChange=${(v) => onChange({ is_active: v })} />
    <${Field} label="Entry node" path="entry_node" error=${error}>
      ${({ id }) => html`<${Select} id=${id} name="entry_node" value=${def.entry_node} options=${def.nodes.map((n) => [n.id, n.id])} onChange=${(v) => onChange({ definition: { ...def, entry_node: v } })} />`}
    <//>
    <${Field} label="Global prompt" path="global_prompt" error=${error} wide hint="what the model knows in every node">
      ${({ id, describedBy }) => html`<${TextArea} id=${id} name="global_prompt" rows="5" aria-describedby=${describedBy} value=${def.global_prompt} onInput=${(v) => onChange({ definition: { ...def, global_prompt: v === '' ? undefined : v } })} />`}
    <//>
    <p class="hint">${def.nodes.length} nodes, ${def.edges.length} edges. Select a node or an edge (on the graph or in the lists) to edit it.</p>
  </div>`;
}
