// One call: what it was, its transcript (node and time per line), the workflow with the path it
// took, the recording in the browser's own player (fetched with the key into a blob: the key is
// never in a URL) lighting the line being spoken, per-turn latency, errors, structured data,
// transfer, variables, and the webhook and e-mail attempts. A live call refreshes itself, and has
// Listen and the live controls (DECISIONS 16, pages/live-call.js) until it ends.
import { useEffect, useRef, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get } from '../api.js';
import { Graph } from '../graph.js';
import { LiveCallPanel } from './live-call.js';
import { Badge, Empty, ErrorBox, Loading, PageHead, callSeconds, clock, duration, ms, when } from '../ui.js';

const WHO = { assistant: 'Assistant', user: 'Caller', tool: 'Tool', system: 'System' };
const LIVE_REFRESH_MS = 2000;

/** sha256 hex of the canonical JSON (keys sorted) of a definition, as the engine hashes it; null where the browser cannot (not a secure page). */
async function hashDefinition(definition) {
  if (!globalThis.crypto?.subtle) return null;
  const sortKeys = (_k, v) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])) : v);
  const bytes = new TextEncoder().encode(JSON.stringify(definition, sortKeys));
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** The recording, fetched with the key into a blob URL for the <audio> element. */
function useRecording(call) {
  const [state, setState] = useState({ url: null, error: null, loading: false });
  const has = !!call?.recording_url && call.status === 'ended';
  useEffect(() => {
    if (!has) return undefined;
    let url = null;
    let gone = false;
    setState({ url: null, error: null, loading: true });
    api('GET', `/calls/${call.id}/recording`, undefined, { raw: true })
      .then((res) => res.blob())
      .then((blob) => {
        if (gone) return;
        url = URL.createObjectURL(blob);
        setState({ url, error: null, loading: false, size: blob.size });
      })
      .catch((error) => !gone && setState({ url: null, error, loading: false }));
    return () => {
      gone = true;
      if (url) URL.revokeObjectURL(url);
    };
  }, [call?.id, has]);
  return state;
}

function Facts({ call, assistants, workflow }) {
  const assistant = assistants.find((a) => a.id === call.assistant_id);
  const rows = [
    ['status', call.status === 'ended' ? 'ended' : html`<${Badge} kind="live">${call.status}<//>`],
    ['ended_reason', call.ended_reason ?? '—'],
    ['type', call.type],
    ['transport', call.transport],
    ['customer', call.customer ? `${call.customer.number}${call.customer.name ? ` (${call.customer.name})` : ''}` : '—'],
    ['number', call.phone_number ? `${call.phone_number.number}${call.phone_number.name ? ` (${call.phone_number.name})` : ''}` : '—'],
    ['answered_by', call.answered_by ?? '—'],
    ['assistant', call.assistant_id ? html`<a href=${`#/assistants/${call.assistant_id}`}>${assistant?.name ?? call.assistant_id}</a>` : 'inline (assistant-request)'],
    ['workflow', call.workflow_id ? html`<a href=${`#/workflows/${call.workflow_id}`}>${workflow?.name ?? call.workflow_id}</a>` : 'none (the assistant alone)'],
    ['created', when(call.created_at)],
    ['started', when(call.started_at)],
    ['ended', when(call.ended_at)],
    ['duration', duration(callSeconds(call))],
  ];
  if (call.workflow_note) rows.push(['workflow_note', call.workflow_note]);
  if (call.trace_id) rows.push(['trace_id', html`<code>${call.trace_id}</code>`]);
  return html`<dl class="facts" id="call-facts">${rows.map(([k, v]) => html`<dt>${k}</dt><dd data-field=${k}>${v}</dd>`)}</dl>`;
}

function Transcript({ messages, speaking, onSeek, canSeek }) {
  if (!messages.length) return html`<p class="hint">No transcript: nothing was said yet, or the assistant's gdpr_mode keeps none once the call is over.</p>`;
  return html`<ol class="transcript" id="call-transcript">
    ${messages.map(
      (m, i) => html`<li key=${i} class=${`msg ${m.role}${i === speaking ? ' speaking' : ''}`} data-seconds=${m.seconds_from_start} aria-current=${i === speaking ? 'true' : undefined}>
        <span class="who">${WHO[m.role] ?? m.role}</span>
        <span class="text">${m.content}</span>
        <span class="meta">
          ${canSeek ? html`<button type="button" class="link" title="Play from here" onClick=${() => onSeek(m.seconds_from_start)}>${clock(m.seconds_from_start)}</button>` : clock(m.seconds_from_start)}
          ${m.node_id ? html` · ${m.node_id}` : null}
          ${m.source === 'control' ? html` · <${Badge} title="Sent by POST /calls/{id}/control">control<//>` : null}
        </span>
      </li>`,
    )}
  </ol>`;
}

/** When a turn ended, m:ss into the call (its `at` is an instant; older records gave seconds). */
const turnAt = (call, at) => {
  if (typeof at === 'number') return clock(at);
  const t = Date.parse(at);
  return Number.isFinite(t) && call.started_at ? clock((t - Date.parse(call.started_at)) / 1000) : '—';
};

/** Each caller turn's latency split (DECISIONS 21), once the call has ended. */
function Turns({ call }) {
  const turns = Array.isArray(call.turns) ? call.turns : null;
  if (!turns) return html`<p class="hint">This call's record has no per-turn latency.</p>`;
  if (!turns.length) return html`<p class="hint">${call.status === 'ended' ? 'No caller turn.' : 'Each turn\u2019s latency is kept once the call ends. (A web call shows its turns live on the workflow\u2019s page.)'}</p>`;
  const order = ['endpointing', 'stt', 'llm_first_token', 'tts_first_audio', 'service', 'total'];
  const fields = [...new Set(turns.flatMap((t) => Object.keys(t.latency ?? {})))].sort((a, b) => (order.indexOf(a) + 99) % 99 - (order.indexOf(b) + 99) % 99);
  return html`${call.turn_latency ? html`<p class="hint" id="call-turn-latency">p50 ${ms(call.turn_latency.p50)} · p95 ${ms(call.turn_latency.p95)} (end of the caller's turn to the reply's first audio)</p>` : null}
    <div class="table-wrap"><table class="list" id="call-turns">
      <thead><tr><th>#</th><th>node</th><th>at</th>${fields.map((f) => html`<th>${f.replace(/_/g, ' ')}</th>`)}</tr></thead>
      <tbody>${turns.map((t, i) => html`<tr><td>${i + 1}</td><td>${t.node_id ?? '—'}</td><td>${turnAt(call, t.at)}</td>${fields.map((f) => html`<td>${ms(t.latency?.[f])}</td>`)}</tr>`)}</tbody>
    </table></div>`;
}

/** What the call used and cost (DECISIONS 21), once it has ended. */
function Cost({ call }) {
  const cost = call.cost;
  if (!cost) return html`<p class="hint">${call.status === 'ended' ? 'Not known for this call.' : 'Known once the call ends.'}</p>`;
  return html`<p><b id="call-cost">${cost.currency} ${cost.total.toFixed(4)}</b> <span class="hint">at the organization's prices (read ${cost.prices_read_on})</span></p>
    ${cost.breakdown.length
      ? html`<div class="table-wrap"><table class="list">
          <thead><tr><th>kind</th><th>provider</th><th>model</th><th>quantity</th><th>unit price</th><th>amount</th></tr></thead>
          <tbody>${cost.breakdown.map((b) => html`<tr><td>${b.kind}</td><td>${b.provider}</td><td>${b.model ?? '—'}</td><td>${+b.quantity.toPrecision(4)} ${b.unit.replace(/_/g, ' ')}</td><td>${b.unit_price ?? '—'}</td><td>${b.amount.toFixed(4)}</td></tr>`)}</tbody>
        </table></div>`
      : null}`;
}

function Attempts({ id, kind }) {
  const [state, setState] = useState({ loading: true, rows: [], error: null });
  useEffect(() => {
    get(`/calls/${id}/${kind}`)
      .then((body) => setState({ loading: false, rows: body[kind], error: null }))
      .catch((error) => setState({ loading: false, rows: [], error }));
  }, [id, kind]);
  if (state.loading) return html`<${Loading} />`;
  if (state.error) return html`<${ErrorBox} error=${state.error} />`;
  if (!state.rows.length) {
    return html`<p class="hint">${kind === 'webhooks' ? 'No webhook was sent for this call (no webhook URL on the number, the assistant or the account, or none of the events it asks for).' : 'No e-mail was sent for this call (the assistant has no notification address, or no SMTP server is set).'}</p>`;
  }
  return html`<div class="table-wrap"><table class="list" id=${`call-${kind}`}>
    <thead><tr><th>when</th><th>${kind === 'webhooks' ? 'event' : 'recipient'}</th><th>attempt</th><th>outcome</th><th>${kind === 'webhooks' ? 'HTTP' : 'SMTP'}</th><th>took</th><th>why</th></tr></thead>
    <tbody>${state.rows.map(
      (r) => html`<tr>
        <td>${when(r.created_at)}</td><td>${r.event ?? r.recipient}</td><td>${r.attempt}</td>
        <td><span class=${`outcome ${r.outcome}`}>${r.outcome}</span></td><td>${r.status_code ?? r.smtp_code ?? '—'}</td>
        <td>${ms(r.duration_ms)}</td><td>${r.error ?? r.smtp_response ?? ''}${r.next_retry_at ? ` (next try ${when(r.next_retry_at)})` : ''}</td>
      </tr>`,
    )}</tbody>
  </table></div>`;
}

export function CallPage({ id }) {
  const [state, setState] = useState({ loading: true, call: null, error: null });
  const [refs, setRefs] = useState({ assistants: [], workflow: null, workflowError: null, changed: false });
  const audio = useRef(null);
  const [speaking, setSpeaking] = useState(-1);
  const call = state.call;

  const load = async () => {
    try {
      const { call: c } = await get(`/calls/${id}`);
      setState({ loading: false, call: c, error: null });
    } catch (error) {
      setState((s) => ({ loading: false, call: s.call, error }));
    }
  };
  useEffect(() => {
    setState({ loading: true, call: null, error: null });
    void load();
  }, [id]);
  const live = call && call.status !== 'ended';
  useEffect(() => {
    if (!live) return undefined;
    const t = setInterval(load, LIVE_REFRESH_MS);
    return () => clearInterval(t);
  }, [live, id]);

  const workflowId = call?.workflow_id;
  useEffect(() => {
    if (!call) return;
    let gone = false;
    (async () => {
      const assistants = (await get('/assistants').catch(() => ({ assistants: [] }))).assistants;
      let workflow = null;
      let workflowError = null;
      let changed = false;
      if (workflowId) {
        try {
          workflow = (await get(`/workflows/${workflowId}`)).workflow;
          const hash = await hashDefinition(workflow.definition);
          changed = !!(hash && call.definition_hash && hash !== call.definition_hash);
        } catch (err) {
          workflowError = err;
        }
      }
      if (!gone) setRefs({ assistants, workflow, workflowError, changed });
    })();
    return () => {
      gone = true;
    };
  }, [call?.id, workflowId]);

  const recording = useRecording(call);
  const messages = call?.messages ?? [];
  const onTime = () => {
    const t = audio.current?.currentTime ?? 0;
    let at = -1;
    messages.forEach((m, i) => {
      if (m.seconds_from_start <= t) at = i;
    });
    setSpeaking(at);
  };
  const seek = (s) => {
    if (!audio.current) return;
    audio.current.currentTime = s;
    void audio.current.play();
  };

  if (state.loading) return html`<div class="page"><${PageHead} title="Call" /><${Loading} /></div>`;
  if (!call) return html`<div class="page"><${PageHead} title="Call" /><${ErrorBox} error=${state.error} /><p><a href="#/calls">Back to the calls</a></p></div>`;
  const errors = call.errors ?? [];
  const variables = Object.entries(call.variables ?? {});
  return html`<div class="page call-page" data-call=${call.id}>
    <${PageHead} title=${html`Call <code class="id">${call.id.slice(0, 8)}</code>`} sub=${`${call.type.replace(/_/g, ' ')} · ${when(call.created_at)}`}>
      <a class="button quiet" href="#/calls">All calls</a>
    <//>
    ${state.error ? html`<${ErrorBox} error=${state.error} title="Could not refresh the call" />` : null}
    ${live
      ? html`<${LiveCallPanel}
          call=${call}
          nodeIds=${refs.workflow ? refs.workflow.definition.nodes.map((n) => n.id) : []}
          refreshSeconds=${LIVE_REFRESH_MS / 1000}
          onCall=${(c) => setState({ loading: false, call: c, error: null })}
          onEvent=${(e) => ['message', 'node', 'ended'].includes(e.type) && void load()}
        />`
      : null}
    <div class="columns call-columns">
      <section class="panel">
        <h2>The call</h2>
        <${Facts} call=${call} assistants=${refs.assistants} workflow=${refs.workflow} />
      </section>
      <section class="panel">
        <h2>Recording</h2>
        ${call.recording_url
          ? recording.error
            ? html`<${ErrorBox} error=${recording.error} title="The recording could not be fetched" />`
            : html`<audio id="recording" ref=${audio} controls preload="auto" src=${recording.url ?? undefined} onTimeUpdate=${onTime} onSeeked=${onTime} onPlay=${onTime} aria-label="The call's recording"></audio>
                <p class="hint">${recording.loading ? 'Fetching the recording…' : `Stereo WAV: left the customer, right the assistant${recording.size ? ` · ${(recording.size / 1024).toFixed(0)} KiB` : ''}. Playing lights the line being spoken; a line's time plays from it.`}</p>`
          : html`<p class="hint">${live ? 'The recording is available once the call has ended.' : 'Not recorded: the assistant\u2019s recording_consent is off, or its gdpr_mode is on, or the recording was deleted after RECORDING_RETENTION_DAYS.'}</p>`}
        <h2>Transcript</h2>
        <${Transcript} messages=${messages} speaking=${speaking} onSeek=${seek} canSeek=${!!recording.url} />
      </section>
    </div>
    <section class="panel">
      <h2>Workflow ${refs.workflow ? html`<span class="hint">${refs.workflow.name} · the path taken is green, ${live ? 'the current node filled' : 'the last node filled'}</span>` : null}</h2>
      ${!call.workflow_id
        ? html`<p class="hint">The call ran its assistant alone (no workflow).${call.nodes_visited.length ? ` Nodes: ${call.nodes_visited.join(' → ')}` : ''}</p>`
        : refs.workflowError
          ? html`<p class="hint">The workflow ${call.workflow_id} is gone (${refs.workflowError.error}). Path: ${call.nodes_visited.join(' → ') || '—'}</p>`
          : refs.workflow
            ? html`${refs.changed ? html`<p class="hint warn">The workflow has changed since this call (its definition_hash differs): the graph is the workflow as it is now.</p>` : null}
                <${Graph} definition=${refs.workflow.definition} layout=${refs.workflow.layout} current=${call.current_node} visited=${call.nodes_visited} label="The call's path through its workflow" />`
            : html`<${Loading} />`}
      <p class="path">Path: <span id="call-path">${call.nodes_visited.join(' → ') || '—'}</span></p>
    </section>
    <div class="columns">
      <section class="panel">
        <h2>Per-turn latency</h2>
        <${Turns} call=${call} />
        <h2>Errors</h2>
        ${errors.length
          ? html`<ul class="errors" id="call-errors">${errors.map((e) => html`<li><code>${e.code ?? 'UNKNOWN'}</code> ${e.message ?? String(e)} ${e.provider ? html`<span class="hint">(${e.provider})</span>` : null}</li>`)}</ul>`
          : html`<p class="hint">None.</p>`}
        <h2>Transfer</h2>
        ${call.transfer
          ? html`<dl class="facts" id="call-transfer">${Object.entries(call.transfer).map(([k, v]) => html`<dt>${k}</dt><dd>${v === null ? '—' : /_at$/.test(k) ? when(v) : String(v)}</dd>`)}</dl>`
          : html`<p class="hint">No transfer.</p>`}
        <h2>Usage and cost</h2>
        <${Cost} call=${call} />
      </section>
      <section class="panel">
        <h2>Structured data</h2>
        ${call.structured_data !== null && call.structured_data !== undefined
          ? html`<pre class="json" id="call-structured">${JSON.stringify(call.structured_data, null, 2)}</pre>`
          : html`<p class="hint">None: the assistant's analysis_plan extracts it when the call ends, if it is enabled.</p>`}
        <h2>Variables</h2>
        ${variables.length
          ? html`<dl class="facts" id="call-variables">${variables.map(([k, v]) => html`<dt>${k}</dt><dd>${String(v)}</dd>`)}</dl>`
          : html`<p class="hint">None given (variables come with POST /calls, POST /calls/web, POST /chats or an assistant-request answer).</p>`}
      </section>
    </div>
    <section class="panel">
      <h2>Webhook attempts</h2>
      <${Attempts} id=${call.id} kind="webhooks" />
      <h2>E-mail attempts</h2>
      <${Attempts} id=${call.id} kind="emails" />
    </section>
  </div>`;
}

