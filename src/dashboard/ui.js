// Pieces every page uses: a labelled field with the API's details beside it, the error box, the
// empty state, badges, times and durations, a button that asks twice before it destroys.
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { html } from './html.js';
import { detailsFor, splitDetail } from './api.js';

/** A labelled control; `error` is an ApiError whose details naming `path` are shown under it. */
export function Field({ label, path, error, hint, children, wide = false, extra = [], warnings = [] }) {
  const id = useId();
  const problems = [...(path ? detailsFor(error, path) : []), ...extra];
  const warned = path ? detailsFor({ details: warnings }, path) : [];
  const control = typeof children === 'function' ? children({ id, invalid: problems.length > 0, describedBy: problems.length ? `${id}-problems` : undefined }) : children;
  return html`<div class=${`field${wide ? ' wide' : ''}${problems.length ? ' has-problem' : ''}`} data-path=${path}>
    <label for=${id}>${label}</label>
    ${control}
    ${hint ? html`<small class="hint">${hint}</small>` : null}
    ${problems.length
      ? html`<ul class="problems" id=${`${id}-problems`} role="alert">${problems.map((d) => html`<li>${splitDetail(d).path ? splitDetail(d).text : d}</li>`)}</ul>`
      : null}
    ${warned.length ? html`<ul class="warnings">${warned.map((d) => html`<li>${splitDetail(d).text}</li>`)}</ul>` : null}
  </div>`;
}

export function TextInput({ value, onInput, type = 'text', ...rest }) {
  return html`<input type=${type} value=${value ?? ''} onInput=${(e) => onInput(e.currentTarget.value)} ...${rest} />`;
}

export function TextArea({ value, onInput, rows = 3, ...rest }) {
  return html`<textarea rows=${rows} value=${value ?? ''} onInput=${(e) => onInput(e.currentTarget.value)} ...${rest}></textarea>`;
}

export function NumberInput({ value, onInput, ...rest }) {
  return html`<input
    type="number"
    value=${value ?? ''}
    onInput=${(e) => onInput(e.currentTarget.value === '' ? undefined : Number(e.currentTarget.value))}
    ...${rest}
  />`;
}

export function Checkbox({ checked, onChange, label, ...rest }) {
  return html`<label class="check"><input type="checkbox" checked=${!!checked} onChange=${(e) => onChange(e.currentTarget.checked)} ...${rest} /> ${label}</label>`;
}

/** A select of [value, label] pairs; `empty` adds a first option with value ''. */
export function Select({ value, onChange, options, empty, ...rest }) {
  return html`<select value=${value ?? ''} onChange=${(e) => onChange(e.currentTarget.value)} ...${rest}>
    ${empty !== undefined ? html`<option value="">${empty}</option>` : null}
    ${options.map(([v, l]) => html`<option value=${v}>${l}</option>`)}
  </select>`;
}

/** The API's answer to a refused request: its phrase, its message, and the details no field took. */
export function ErrorBox({ error, details, title }) {
  if (!error) return null;
  const shown = details ?? error.details ?? [];
  return html`<div class="error-box" role="alert">
    <strong>${title ?? error.error ?? 'Error'}</strong>
    ${error.message && error.message !== error.error ? html`<span> ${error.message}</span>` : null}
    ${shown.length ? html`<ul>${shown.map((d) => html`<li>${d}</li>`)}</ul>` : null}
  </div>`;
}

/** What a page shows with nothing in it: what it is for, and what to do next. */
export function Empty({ title, children, action }) {
  return html`<div class="empty" data-empty>
    <h3>${title}</h3>
    <div class="empty-text">${children}</div>
    ${action ?? null}
  </div>`;
}

export function Badge({ kind = '', children, title }) {
  return html`<span class=${`badge ${kind}`} title=${title}>${children}</span>`;
}

/** A button that destroys only on its second press (no browser dialog: keyboard and tests alike). */
export function ConfirmButton({ onConfirm, children, confirmLabel = 'Press again to confirm', disabled, class: cls = 'danger', ...rest }) {
  const [armed, setArmed] = useState(false);
  useEffect(() => {
    if (!armed) return undefined;
    const t = setTimeout(() => setArmed(false), 4000);
    return () => clearTimeout(t);
  }, [armed]);
  return html`<button
    type="button"
    class=${`${cls}${armed ? ' armed' : ''}`}
    disabled=${disabled}
    onClick=${() => (armed ? (setArmed(false), onConfirm()) : setArmed(true))}
    ...${rest}
  >${armed ? confirmLabel : children}</button>`;
}

export const when = (iso) => (iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '—');
export const shortWhen = (iso) => {
  if (!iso) return '—';
  const d = new Date(iso);
  const today = new Date();
  return d.toDateString() === today.toDateString()
    ? d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
};

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.round(seconds);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
}

export const callSeconds = (c) => (c.started_at && c.ended_at ? (Date.parse(c.ended_at) - Date.parse(c.started_at)) / 1000 : null);

/** m:ss of a position in a call or a recording. */
export const clock = (s) => (Number.isFinite(s) ? `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, '0')}` : '—');

export const ms = (v) => (Number.isFinite(v) ? `${Math.round(v)} ms` : '—');

/** Sandbox providers: not intelligent, no keys (docs/sandbox.md). */
export const isSandboxAssistant = (a) =>
  [a?.llm_config?.provider, a?.stt_config?.provider, a?.tts_config?.provider].some((p) => p === 'sandbox' || p === 'sandbox-realtime');

/** Page heading with actions on the right. */
export function PageHead({ title, children, sub }) {
  return html`<div class="page-head">
    <div><h1>${title}</h1>${sub ? html`<p class="sub">${sub}</p>` : null}</div>
    <div class="actions">${children}</div>
  </div>`;
}

/** Loads `load()` on mount and whenever `deps` change; `reload` runs it again. */
export function useLoad(load, deps) {
  const [state, setState] = useState({ loading: true, data: null, error: null });
  const seq = useRef(0);
  const run = async () => {
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    try {
      const data = await load();
      if (mine === seq.current) setState({ loading: false, data, error: null });
    } catch (error) {
      if (mine === seq.current) setState({ loading: false, data: null, error });
    }
  };
  useEffect(() => {
    void run();
  }, deps);
  return { ...state, reload: run, set: (data) => setState({ loading: false, data, error: null }) };
}

export function Loading() {
  return html`<p class="loading" aria-busy="true">Loading…</p>`;
}

/** A value at a dotted path of an object (`tts_config.voice_id`). */
export function getPath(obj, path) {
  return path.split('.').reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), obj);
}

/** A copy of `obj` with the value at `path` set; `undefined` removes it, and a block left empty goes too. */
export function setPath(obj, path, value) {
  const keys = path.split('.');
  const out = { ...obj };
  let cur = out;
  const parents = [];
  for (const k of keys.slice(0, -1)) {
    parents.push([cur, k]);
    cur[k] = cur[k] && typeof cur[k] === 'object' && !Array.isArray(cur[k]) ? { ...cur[k] } : {};
    cur = cur[k];
  }
  const last = keys[keys.length - 1];
  if (value === undefined || value === '') delete cur[last];
  else cur[last] = value;
  for (let i = parents.length - 1; i >= 0; i--) {
    const [p, k] = parents[i];
    if (Object.keys(p[k]).length === 0) delete p[k];
    else break;
  }
  return out;
}

export { unclaimed as unclaimedOf } from './api.js';
