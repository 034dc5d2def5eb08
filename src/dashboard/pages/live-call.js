// A live call's own panel on its page (DECISIONS 16): Listen (the call's audio in this browser,
// docs/listen.md) and the controls of POST /calls/{id}/control (say, add a message, go to a node,
// transfer, end), each refusal's details beside the field they name. Gone once the call ends.
import { useEffect, useRef, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, unclaimed } from '../api.js';
import { Listener } from '../listen.js';
import { Badge, Checkbox, ConfirmButton, ErrorBox, Field, Select, TextArea, TextInput } from '../ui.js';

const KINDS = [
  ['say', 'Say a line'],
  ['add-message', 'Add to the model\u2019s context'],
  ['goto', 'Go to a node'],
  ['transfer', 'Transfer'],
  ['end', 'End the call'],
];
const FIELDS = ['type', 'text', 'interrupt', 'role', 'content', 'node_id', 'destination', 'mode', 'operator_message', 'message'];
/** How often the heard-so-far figure is redrawn (the frames come every 20 ms). */
const COUNT_MS = 250;

/** The control's body: only the fields of its type, optional ones left out when empty. */
function bodyOf(f) {
  switch (f.type) {
    case 'say':
      return { type: 'say', text: f.text, ...(f.interrupt ? { interrupt: true } : {}) };
    case 'add-message':
      return { type: 'add-message', role: f.role, content: f.content };
    case 'goto':
      return { type: 'goto', node_id: f.node_id };
    case 'transfer':
      return { type: 'transfer', destination: f.destination, mode: f.mode, ...(f.mode === 'warm' && f.operator_message ? { operator_message: f.operator_message } : {}) };
    default:
      return { type: 'end', ...(f.message ? { message: f.message } : {}) };
  }
}

const DONE = {
  say: 'Said (after the line that plays, unless it interrupts): it shows in the transcript once spoken.',
  'add-message': 'Added: the model reads it from its next turn.',
  goto: 'Moved: the node says its first line.',
  transfer: 'Transferring.',
  end: 'Ending the call.',
};

function ListenPanel({ callId, onEvent }) {
  const [state, setState] = useState({ on: false, busy: false, note: null, error: null });
  const [heard, setHeard] = useState({ frames: 0, bytes: 0, seconds: 0 });
  const listener = useRef(null);
  const stopButton = useRef(null);

  useEffect(() => () => listener.current?.stop(), [callId]);
  useEffect(() => {
    if (!state.on) return undefined;
    stopButton.current?.focus();
    const t = setInterval(() => {
      const l = listener.current;
      if (l) setHeard({ frames: l.frames, bytes: l.bytes, seconds: l.seconds });
    }, COUNT_MS);
    return () => clearInterval(t);
  }, [state.on]);

  const start = async () => {
    setState({ on: false, busy: true, note: null, error: null });
    const l = new Listener(callId, {
      onEvent,
      onClose: (reason) => {
        if (listener.current !== l) return;
        listener.current = null;
        setHeard({ frames: l.frames, bytes: l.bytes, seconds: l.seconds });
        setState({ on: false, busy: false, note: reason, error: null });
      },
    });
    listener.current = l;
    try {
      await l.start();
      setState({ on: true, busy: false, note: null, error: null });
    } catch (error) {
      listener.current = null;
      l.finish('');
      setState({ on: false, busy: false, note: null, error });
    }
  };

  return html`<div class="listen" id="listen" data-listening=${state.on ? 'true' : 'false'} data-frames=${heard.frames} data-bytes=${heard.bytes}>
    <h3>Listen</h3>
    <p class="hint">The call as it happens, about a fifth of a second behind: the customer on the left, the assistant on the right. Nobody on the call hears you.</p>
    <div class="buttons">
      ${state.on
        ? html`<button type="button" id="listen-stop" class="quiet" ref=${stopButton} onClick=${() => listener.current?.stop()}>Stop</button>
            <span role="status" id="listen-status"><${Badge} kind="live">listening<//> ${heard.seconds.toFixed(1)} s heard</span>`
        : html`<button type="button" id="listen-start" disabled=${state.busy} onClick=${start}>${state.busy ? 'Connecting…' : 'Listen'}</button>
            ${state.note ? html`<span class="hint" role="status" id="listen-status">${state.note}${heard.frames ? ` ${heard.seconds.toFixed(1)} s heard.` : ''}</span>` : null}`}
    </div>
    <${ErrorBox} error=${state.error} title="Could not listen" />
  </div>`;
}

function ControlForm({ call, nodeIds, onApplied }) {
  const [form, setForm] = useState({ type: 'say', text: '', interrupt: false, role: 'system', content: '', node_id: '', destination: '', mode: 'cold', operator_message: '', message: '' });
  const [error, setError] = useState(null);
  const [done, setDone] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (v) => setForm((f) => ({ ...f, [k]: v }));
  const t = form.type;

  const send = async () => {
    setBusy(true);
    setDone(null);
    try {
      const { call: now } = await api('POST', `/calls/${call.id}/control`, bodyOf(form));
      setError(null);
      setDone(DONE[t]);
      if (t === 'say') set('text')('');
      if (t === 'add-message') set('content')('');
      onApplied(now);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const field = (label, path, control, hint) => html`<${Field} label=${label} path=${path} error=${error} hint=${hint}>${({ id, describedBy }) => control(id, describedBy)}<//>`;

  // Enter in a field sends, except an end: that asks for its button's second press
  const submit = (e) => {
    e.preventDefault();
    if (t !== 'end') void send();
  };

  return html`<form class="control-form" id="control-form" novalidate onSubmit=${submit}>
    <h3>Control</h3>
    <div class="grid">
      ${field('What', 'type', (id) => html`<${Select} id=${id} name="type" value=${t} options=${KINDS} onChange=${(v) => (setForm((f) => ({ ...f, type: v })), setError(null), setDone(null))} />`)}
      ${t === 'say'
        ? html`${field('Line to say', 'text', (id, d) => html`<${TextArea} id=${id} name="text" rows="2" aria-describedby=${d} value=${form.text} onInput=${set('text')} />`, 'in the assistant\u2019s voice')}
            <div class="field check-field"><${Checkbox} name="interrupt" checked=${form.interrupt} onChange=${set('interrupt')} label="At once, cutting what plays" /></div>`
        : null}
      ${t === 'add-message'
        ? html`${field('Role', 'role', (id) => html`<${Select} id=${id} name="role" value=${form.role} options=${[['system', 'system (an instruction)'], ['user', 'user (as if the caller said it)']]} onChange=${set('role')} />`)}
            ${field('Message', 'content', (id, d) => html`<${TextArea} id=${id} name="content" rows="2" aria-describedby=${d} value=${form.content} onInput=${set('content')} />`, 'not said; read by the model from its next turn')}`
        : null}
      ${t === 'goto'
        ? field('Node', 'node_id', (id, d) =>
            nodeIds.length
              ? html`<${Select} id=${id} name="node_id" aria-describedby=${d} value=${form.node_id} empty="Choose a node" options=${nodeIds.map((n) => [n, n === call.current_node ? `${n} (current)` : n])} onChange=${set('node_id')} />`
              : html`<${TextInput} id=${id} name="node_id" aria-describedby=${d} value=${form.node_id} onInput=${set('node_id')} />`,
          )
        : null}
      ${t === 'transfer'
        ? html`${field('Destination', 'destination', (id, d) => html`<${TextInput} id=${id} name="destination" type="tel" placeholder="+14155550123" aria-describedby=${d} value=${form.destination} onInput=${set('destination')} />`, 'E.164')}
            ${field('Mode', 'mode', (id, d) => html`<${Select} id=${id} name="mode" aria-describedby=${d} value=${form.mode} options=${[['cold', 'cold (at once)'], ['warm', 'warm']]} onChange=${set('mode')} />`)}
            ${form.mode === 'warm' ? field('Operator message', 'operator_message', (id, d) => html`<${TextInput} id=${id} name="operator_message" aria-describedby=${d} value=${form.operator_message} onInput=${set('operator_message')} />`) : null}`
        : null}
      ${t === 'end' ? field('Last words', 'message', (id, d) => html`<${TextInput} id=${id} name="message" aria-describedby=${d} value=${form.message} onInput=${set('message')} />`, 'optional: said first, then the call ends api-ended-call') : null}
    </div>
    <${ErrorBox} error=${error} details=${unclaimed(error, FIELDS)} title=${error?.status === 400 ? 'Not sent' : undefined} />
    <div class="buttons">
      ${t === 'end'
        ? html`<${ConfirmButton} id="send-control" disabled=${busy} onConfirm=${send} confirmLabel="Press again to end the call">End the call<//>`
        : html`<button type="submit" id="send-control" disabled=${busy}>${busy ? 'Sending…' : 'Send'}</button>`}
      ${done ? html`<span class="status ok" role="status" id="control-status">${done}</span>` : null}
    </div>
  </form>`;
}

/**
 * `call`: the live call; `nodeIds`: its workflow's nodes (for goto); `onCall(call)`: a newer view
 * of the call (a control's answer); `onEvent(json)`: a listener's event (the page refreshes on it).
 */
export function LiveCallPanel({ call, nodeIds, onCall, onEvent, refreshSeconds }) {
  const controllable = call.status === 'in-progress';
  return html`<section class="panel live-controls" id="call-controls" data-slot="call-controls">
    <h2>Live call <${Badge} kind="live">${call.status}<//></h2>
    <p class="hint">This page follows the call (every ${refreshSeconds} s, and at each line while you listen); these controls go once it ends.</p>
    <div class="columns">
      <${ListenPanel} callId=${call.id} onEvent=${onEvent} />
      ${controllable
        ? html`<${ControlForm} call=${call} nodeIds=${nodeIds} onApplied=${onCall} />`
        : html`<p class="hint">Controls take a call in progress; this one is ${call.status}.</p>`}
    </div>
  </section>`;
}
