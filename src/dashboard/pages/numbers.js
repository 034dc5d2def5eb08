// Numbers: the organization's phone numbers, each with the assistant and workflow its calls run,
// the carrier that brings them (Twilio or a SIP trunk) and an optional webhook of its own.
import { useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get, unclaimed } from '../api.js';
import { Badge, ConfirmButton, Empty, ErrorBox, Field, Loading, PageHead, Select, TextInput, useLoad } from '../ui.js';

const PATHS = ['number', 'name', 'provider', 'assistant_id', 'workflow_id', 'webhook'];

function NumberForm({ initial, assistants, workflows, onSaved, onCancel }) {
  const [n, setN] = useState({
    number: initial?.number ?? '',
    name: initial?.name ?? '',
    provider: initial?.provider ?? 'twilio',
    assistant_id: initial?.assistant_id ?? '',
    workflow_id: initial?.workflow_id ?? '',
    webhook_url: initial?.webhook?.url ?? '',
  });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (v) => setN((x) => ({ ...x, [k]: v }));
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    const body = {
      number: n.number.trim(),
      name: n.name.trim() || null,
      provider: n.provider,
      assistant_id: n.assistant_id || null,
      workflow_id: n.workflow_id || null,
    };
    // the webhook as shown keeps its secret: sent only when its address changed
    if (n.webhook_url.trim() !== (initial?.webhook?.url ?? '')) body.webhook = n.webhook_url.trim() ? { url: n.webhook_url.trim() } : null;
    try {
      if (initial) await api('PATCH', `/numbers/${initial.id}`, body);
      else await api('POST', '/numbers', body);
      onSaved();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="panel inline-form number-form" novalidate onSubmit=${submit} data-number-form=${initial?.id ?? 'new'}>
    <h2>${initial ? `Number ${initial.number}` : 'Add a number'}</h2>
    <div class="grid">
      <${Field} label="Number (E.164)" path="number" error=${error}>${({ id, describedBy }) => html`<${TextInput} id=${id} name="number" aria-describedby=${describedBy} value=${n.number} onInput=${set('number')} placeholder="+14155550100" inputmode="tel" />`}<//>
      <${Field} label="Name" path="name" error=${error}>${({ id }) => html`<${TextInput} id=${id} name="name" value=${n.name} onInput=${set('name')} placeholder="Front desk line" />`}<//>
      <${Field} label="Carrier" path="provider" error=${error}>${({ id }) => html`<${Select} id=${id} name="provider" value=${n.provider} options=${[['twilio', 'Twilio (Media Streams)'], ['sip', 'SIP trunk']]} onChange=${set('provider')} />`}<//>
      <${Field} label="Assistant" path="assistant_id" error=${error}>${({ id }) => html`<${Select} id=${id} name="assistant_id" value=${n.assistant_id} empty="(none: calls are refused)" options=${assistants.map((a) => [a.id, a.name])} onChange=${set('assistant_id')} />`}<//>
      <${Field} label="Workflow" path="workflow_id" error=${error}>${({ id }) => html`<${Select} id=${id} name="workflow_id" value=${n.workflow_id} empty="(none: the assistant alone)" options=${workflows.map((w) => [w.id, w.name])} onChange=${set('workflow_id')} />`}<//>
      <${Field} label="Webhook URL of its own" path="webhook" error=${error} hint="optional: else the assistant's, else the account's">${({ id }) => html`<${TextInput} id=${id} name="webhook_url" value=${n.webhook_url} onInput=${set('webhook_url')} placeholder="https://…" />`}<//>
    </div>
    <${ErrorBox} error=${error} details=${unclaimed(error, PATHS)} />
    <div class="buttons"><button type="submit" disabled=${busy}>${initial ? 'Save' : 'Add number'}</button><button type="button" class="quiet" onClick=${onCancel}>Cancel</button></div>
  </form>`;
}

export function NumbersPage() {
  const { loading, data, error, reload } = useLoad(async () => {
    const [numbers, assistants, workflows] = await Promise.all([get('/numbers'), get('/assistants'), get('/workflows')]);
    return { numbers: numbers.numbers, assistants: assistants.assistants, workflows: workflows.workflows };
  }, []);
  const [editing, setEditing] = useState(null);
  const [deleteError, setDeleteError] = useState(null);
  const numbers = data?.numbers ?? [];
  const nameOf = (list, id) => list.find((x) => x.id === id)?.name ?? null;
  const done = () => {
    setEditing(null);
    void reload();
  };
  const remove = async (id) => {
    try {
      await api('DELETE', `/numbers/${id}`);
      setDeleteError(null);
      void reload();
    } catch (err) {
      setDeleteError(err);
    }
  };
  return html`<div class="page">
    <${PageHead} title="Numbers" sub="Phone numbers, and what answers them.">
      <button type="button" id="add-number" onClick=${() => setEditing('new')}>Add a number</button>
    <//>
    ${error ? html`<${ErrorBox} error=${error} />` : null}
    <${ErrorBox} error=${deleteError} />
    ${loading && !data ? html`<${Loading} />` : null}
    ${editing === 'new' && data ? html`<${NumberForm} assistants=${data.assistants} workflows=${data.workflows} onSaved=${done} onCancel=${() => setEditing(null)} />` : null}
    ${data && !numbers.length && editing !== 'new'
      ? html`<${Empty} title="No numbers yet" action=${html`<button type="button" onClick=${() => setEditing('new')}>Add the first one</button>`}>
          <p>A number brings phone calls to an assistant: point a Twilio number's voice webhook at this server (<code>/twilio/voice</code>) with the account's Twilio credentials set, or route it from your SIP trunk. Without numbers you can still try assistants and workflows from their pages.</p>
        <//>`
      : null}
    ${numbers.length
      ? html`<div class="table-wrap"><table class="list" id="number-list">
          <thead><tr><th>Number</th><th class="wide-only">Name</th><th>Carrier</th><th>Assistant</th><th class="wide-only">Workflow</th><th></th></tr></thead>
          <tbody>${numbers.map((n) =>
            editing === n.id
              ? html`<tr><td colspan="6"><${NumberForm} initial=${n} assistants=${data.assistants} workflows=${data.workflows} onSaved=${done} onCancel=${() => setEditing(null)} /></td></tr>`
              : html`<tr data-number=${n.id}>
                  <td>${n.number}</td><td class="wide-only">${n.name ?? ''}</td><td>${n.provider}</td>
                  <td>${n.assistant_id ? html`<a href=${`#/assistants/${n.assistant_id}`}>${nameOf(data.assistants, n.assistant_id) ?? n.assistant_id}</a>` : html`<${Badge} kind="warn">none<//>`}</td>
                  <td class="wide-only">${n.workflow_id ? html`<a href=${`#/workflows/${n.workflow_id}`}>${nameOf(data.workflows, n.workflow_id) ?? n.workflow_id}</a>` : '—'}</td>
                  <td class="row-actions"><button type="button" class="quiet small" onClick=${() => setEditing(n.id)}>Edit</button> <${ConfirmButton} class="danger small" onConfirm=${() => remove(n.id)} confirmLabel="Delete?">Delete<//></td>
                </tr>`,
          )}</tbody>
        </table></div>`
      : null}
  </div>`;
}
