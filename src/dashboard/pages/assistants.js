// Assistants: the organization's, with their providers; sandbox and inactive ones labelled.
import { html } from '../html.js';
import { get } from '../api.js';
import { Badge, Empty, ErrorBox, Loading, PageHead, isSandboxAssistant, shortWhen, useLoad } from '../ui.js';

export function AssistantsPage() {
  const { loading, data, error } = useLoad(() => get('/assistants'), []);
  const list = data?.assistants ?? [];
  return html`<div class="page">
    <${PageHead} title="Assistants" sub="Who answers: the model, the voice, the transcriber, and how calls go.">
      <a class="button" id="add-assistant" href="#/assistants/new">New assistant</a>
    <//>
    ${error ? html`<${ErrorBox} error=${error} />` : null}
    ${loading && !data ? html`<${Loading} />` : null}
    ${data && !list.length
      ? html`<${Empty} title="No assistants yet" action=${html`<a class="button" href="#/assistants/new">Make the first one</a>`}>
          <p>An assistant is a model, a voice and a transcriber, with how its calls behave. Start on the sandbox providers: they need no keys.</p>
        <//>`
      : null}
    ${list.length
      ? html`<div class="table-wrap"><table class="list" id="assistant-list">
          <thead><tr><th>Name</th><th>Model</th><th class="wide-only">Transcriber</th><th class="wide-only">Voice</th><th>Updated</th></tr></thead>
          <tbody>${list.map(
            (a) => html`<tr data-assistant=${a.id}>
              <td><a href=${`#/assistants/${a.id}`}>${a.name}</a> ${isSandboxAssistant(a) ? html`<${Badge} kind="sandbox">sandbox<//>` : null} ${a.is_active === false ? html`<${Badge} kind="muted">inactive<//>` : null}</td>
              <td>${[a.llm_config?.provider, a.llm_config?.model].filter(Boolean).join(' · ') || '—'}</td>
              <td class="wide-only">${a.stt_config?.provider ?? '—'}</td>
              <td class="wide-only">${[a.tts_config?.provider, a.tts_config?.voice_id].filter(Boolean).join(' · ') || '—'}</td>
              <td>${shortWhen(a.updated_at)}</td>
            </tr>`,
          )}</tbody>
        </table></div>`
      : null}
  </div>`;
}
