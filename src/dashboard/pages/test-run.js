// One run of a test suite (DECISIONS 20, GET /test-suites/{id}/runs/{run_id}): per test passed or
// failed, the first failed expectation, the transcript, the nodes, the tool calls, the judge's
// reason and the duration. The page asks again every second until the run is done.
import { useEffect } from 'preact/hooks';
import { html } from '../html.js';
import { get } from '../api.js';
import { Badge, ErrorBox, Loading, PageHead, shortWhen, useLoad } from '../ui.js';
import { RunStatus, seconds } from './test-suites.js';

const POLL_MS = 1000;
const WHO = { assistant: 'Assistant', user: 'Caller', tool: 'Tool' };

function ResultStatus({ r }) {
  if (r.status === 'passed') return html`<${Badge} kind="passed">passed<//>`;
  if (r.status === 'failed') return html`<${Badge} kind="failed">failed<//>`;
  return html`<${Badge} kind="live">${r.status}<//>`;
}

function Result({ r }) {
  const done = r.status === 'passed' || r.status === 'failed';
  return html`<article class=${`panel result ${r.status}`} data-test=${r.name} data-status=${r.status}>
    <h3 class="result-head"><${ResultStatus} r=${r} /> <span class="result-name">${r.name}</span> <span class="hint">${r.mode} · ${seconds(r.duration_ms)}</span></h3>
    ${r.failure ? html`<p class="failure" data-field="failure"><b>First failed expectation:</b> <code>${r.failure}</code></p>` : null}
    ${r.judge
      ? html`<p class="judge" data-field="judge"><b>Judge:</b> ${r.judge.passed ? 'pass' : 'fail'}: ${r.judge.reason}</p>`
      : null}
    <dl class="facts">
      <dt>nodes</dt><dd data-field="nodes">${r.nodes_visited.join(' → ') || '—'}</dd>
      <dt>ended_reason</dt><dd data-field="ended_reason">${r.ended_reason ?? (done ? 'not ended' : '—')}</dd>
      <dt>tool calls</dt>
      <dd data-field="tool_calls">${r.tool_calls.length
        ? html`<ul class="plain">${r.tool_calls.map((t) => html`<li><code>${t.name}(${JSON.stringify(t.arguments)})</code> <span class="hint">${t.answered_by === 'tool_results' ? 'answered by the test' : 'its URL'}${t.error ? ` · ${t.error}` : ''}</span></li>`)}</ul>`
        : 'none'}</dd>
      ${r.chat_id ? html`<dt>chat</dt><dd><code>${r.chat_id}</code></dd>` : null}
      ${r.call_id ? html`<dt>call</dt><dd><a href=${`#/calls/${r.call_id}`}>${r.call_id.slice(0, 8)}</a></dd>` : null}
      ${r.errors.length ? html`<dt>errors</dt><dd>${r.errors.map((e) => html`<div><code>${e.code ?? 'UNKNOWN'}</code> ${e.message ?? ''}</div>`)}</dd>` : null}
    </dl>
    ${r.transcript.length
      ? html`<details open=${r.status === 'failed'}>
          <summary>Transcript (${r.transcript.length} line${r.transcript.length === 1 ? '' : 's'})</summary>
          <ol class="transcript">${r.transcript.map(
            (m, i) => html`<li key=${i} class=${`msg ${m.role}`}>
              <span class="who">${WHO[m.role] ?? m.role}</span>
              <span class="text">${m.tool_name ? html`<code>${m.tool_name}</code> ` : null}${m.content}</span>
              <span class="meta">${m.node_id ?? ''}</span>
            </li>`,
          )}</ol>
        </details>`
      : html`<p class="hint">${done ? 'No transcript.' : 'Not started yet.'}</p>`}
  </article>`;
}

export function TestRunPage({ suiteId, runId }) {
  const { data, error, reload } = useLoad(async () => {
    const [{ run }, suite] = await Promise.all([get(`/test-suites/${suiteId}/runs/${runId}`), get(`/test-suites/${suiteId}`).then((b) => b.test_suite, () => null)]);
    return { run, suite };
  }, [suiteId, runId]);
  const running = data?.run.status === 'running';
  useEffect(() => {
    if (!running) return undefined;
    const t = setTimeout(reload, POLL_MS);
    return () => clearTimeout(t);
  }, [data]);

  if (!data && !error) return html`<div class="page"><${PageHead} title="Test run" /><${Loading} /></div>`;
  if (!data) return html`<div class="page"><${PageHead} title="Test run" /><${ErrorBox} error=${error} /><p><a href=${`#/test-suites/${suiteId}`}>Back to the suite</a></p></div>`;
  const { run, suite } = data;
  const s = run.summary;
  return html`<div class="page run-page" data-run=${run.id} data-status=${run.status}>
    <${PageHead} title=${html`Run of ${suite?.name ?? 'a suite'} <${RunStatus} status=${run.status} />`} sub=${`started ${shortWhen(run.created_at)}${run.ended_at ? ` · took ${seconds(run.duration_ms)}` : ''}`}>
      <a class="button quiet" href=${`#/test-suites/${suiteId}`}>The suite and its runs</a>
    <//>
    ${error ? html`<${ErrorBox} error=${error} title="Could not refresh the run" />` : null}
    <p class="run-summary" id="run-summary" role="status">
      <b>${s.passed}</b> passed · <b>${s.failed}</b> failed${s.running ? html` · <b>${s.running}</b> running` : null}${s.pending ? html` · <b>${s.pending}</b> waiting` : null} of ${s.total}
      ${running ? html`<span class="hint"> (this page follows the run)</span>` : null}
    </p>
    ${run.status === 'failed' ? html`<p class="hint">Each failed test shows its first failed expectation and its transcript; fix the workflow or the test, then run the suite again from <a href=${`#/test-suites/${suiteId}`}>its page</a>.</p>` : null}
    ${run.status === 'passed' ? html`<p class="hint">Every test passed.</p>` : null}
    <div class="results" id="run-results">${run.results.map((r) => html`<${Result} key=${r.name} r=${r} />`)}</div>
  </div>`;
}
