// Workflows: the organization's, with a form that makes a new one (a greeting and a goodbye, to
// be drawn on in the editor).
import { useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get } from '../api.js';
import { navigate } from '../router.js';
import { Badge, Empty, ErrorBox, Field, Loading, PageHead, TextInput, shortWhen, unclaimedOf, useLoad } from '../ui.js';

/** What a new workflow starts from: valid as it is, so that it can be tried at once. */
export const starterDefinition = () => ({
  version: 1,
  entry_node: 'greeting',
  global_prompt: '',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: 'Hello, how can I help?', instructions: 'Find out what the caller needs.' },
    { id: 'goodbye', type: 'end', first_line: 'Thank you for calling, goodbye.' },
  ],
  edges: [{ from: 'greeting', to: 'goodbye', description: 'the caller is done or says goodbye' }],
});

function NewWorkflow({ onCancel }) {
  const [name, setName] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    try {
      const definition = starterDefinition();
      delete definition.global_prompt;
      const { workflow } = await api('POST', '/workflows', { name, definition });
      navigate(`/workflows/${workflow.id}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="panel inline-form" id="new-workflow" novalidate onSubmit=${submit}>
    <h2>New workflow</h2>
    <${Field} label="Name" path="name" error=${error}>${({ id, describedBy }) => html`<${TextInput} id=${id} name="name" aria-describedby=${describedBy} value=${name} onInput=${setName} required maxlength="200" />`}<//>
    <${ErrorBox} error=${error} details=${unclaimedOf(error, ['name'])} />
    <div class="buttons"><button type="submit" disabled=${busy}>Create and open</button><button type="button" class="quiet" onClick=${onCancel}>Cancel</button></div>
  </form>`;
}

export function WorkflowsPage() {
  const { loading, data, error } = useLoad(() => get('/workflows'), []);
  const [adding, setAdding] = useState(false);
  const workflows = data?.workflows ?? [];
  return html`<div class="page">
    <${PageHead} title="Workflows" sub="The conversations your assistants run: nodes, and the edges between them.">
      <button type="button" id="add-workflow" onClick=${() => setAdding(true)}>New workflow</button>
    <//>
    ${adding ? html`<${NewWorkflow} onCancel=${() => setAdding(false)} />` : null}
    ${error ? html`<${ErrorBox} error=${error} />` : null}
    ${loading && !data ? html`<${Loading} />` : null}
    ${data && !workflows.length && !adding
      ? html`<${Empty} title="No workflows yet" action=${html`<button type="button" onClick=${() => setAdding(true)}>Make the first one</button>`}>
          <p>A workflow is a graph of conversation, tool, transfer and end nodes. Without one, an assistant simply talks; with one, the call moves from node to node as the edges say.</p>
        <//>`
      : null}
    ${workflows.length
      ? html`<div class="table-wrap"><table class="list" id="workflow-list">
          <thead><tr><th>Name</th><th>Nodes</th><th>Edges</th><th class="wide-only">Entry</th><th>Updated</th></tr></thead>
          <tbody>${workflows.map(
            (w) => html`<tr data-workflow=${w.id}>
              <td><a href=${`#/workflows/${w.id}`}>${w.name}</a> ${w.is_active ? null : html`<${Badge} kind="muted">inactive<//>`}</td>
              <td>${w.node_count}</td><td>${w.edge_count}</td><td class="wide-only">${w.entry_node}</td><td>${shortWhen(w.updated_at)}</td>
            </tr>`,
          )}</tbody>
        </table></div>`
      : null}
  </div>`;
}
