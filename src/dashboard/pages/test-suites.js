// Test suites (DECISIONS 20, docs/test-suites.md): the organization's, listed (GET /test-suites);
// a suite's page with its tests, Run (POST /test-suites/{id}/runs) and its runs
// (GET /test-suites/{id}/runs). A run's page is pages/test-run.js.
import { useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get } from '../api.js';
import { navigate } from '../router.js';
import { Badge, Empty, ErrorBox, Loading, PageHead, duration, ms, shortWhen, useLoad } from '../ui.js';

/** A run's status as a badge: running (live), passed, failed. */
export function RunStatus({ status }) {
  return html`<${Badge} kind=${status === 'running' ? 'live' : status === 'passed' ? 'passed' : 'failed'}>${status}<//>`;
}

export const seconds = (v) => (!Number.isFinite(v) ? '—' : v < 1000 ? ms(v) : v < 10_000 ? `${(v / 1000).toFixed(1)} s` : duration(v / 1000));

export function TestSuitesPage() {
  const { loading, data, error } = useLoad(async () => {
    let suites;
    try {
      suites = (await get('/test-suites')).test_suites ?? [];
    } catch (err) {
      if (err.status === 404) return { available: false, suites: [], assistants: [] };
      throw err;
    }
    const assistants = suites.length ? (await get('/assistants')).assistants : [];
    return { available: true, suites, assistants };
  }, []);
  const nameOf = (id) => data?.assistants.find((a) => a.id === id)?.name ?? id;
  return html`<div class="page">
    <${PageHead} title="Test suites" sub="Scripted and simulated conversations that check an assistant and its workflow." />
    ${error ? html`<${ErrorBox} error=${error} />` : null}
    ${loading && !data ? html`<${Loading} />` : null}
    ${data && !data.available
      ? html`<${Empty} title="Test suites are not on this server yet">
          <p>A test suite runs chats or voice calls against an assistant, with a script or a simulated caller, and checks the nodes, the tool calls, the transcript and the ending. This page will list them, run them and show each run.</p>
        <//>`
      : null}
    ${data?.available && !data.suites.length
      ? html`<${Empty} title="No test suites yet">
          <p>A test suite runs scripted or simulated conversations against an assistant and checks where they go. Make one with
            <code>npm run test-suite -- --file examples/test-suite-front-desk.json</code> or <code>POST /test-suites</code> (docs/test-suites.md); it shows here, to run.</p>
        <//>`
      : null}
    ${data?.suites.length
      ? html`<div class="table-wrap"><table class="list" id="suite-list">
          <thead><tr><th>Name</th><th>Assistant</th><th>Tests</th><th class="wide-only">Updated</th></tr></thead>
          <tbody>${data.suites.map(
            (s) => html`<tr data-suite=${s.id}>
              <td><a href=${`#/test-suites/${s.id}`}>${s.name}</a></td>
              <td><a href=${`#/assistants/${s.assistant_id}`}>${nameOf(s.assistant_id)}</a></td>
              <td>${s.test_count ?? s.tests?.length ?? '—'}</td>
              <td class="wide-only">${shortWhen(s.updated_at)}</td>
            </tr>`,
          )}</tbody>
        </table></div>
        <p class="hint">Open a suite to run it and see its runs. In CI: <code>npm run test-suite -- ${'<suite id>'}</code> exits non-zero when a test fails.</p>`
      : null}
  </div>`;
}

/** What a test checks, in a few words. */
function checks(t) {
  const out = [];
  if (t.script) out.push(`script of ${t.script.length} step${t.script.length === 1 ? '' : 's'}`);
  if (t.caller) out.push(`simulated caller (at most ${t.caller.max_turns} turns): ${t.caller.goal}`);
  if (t.expect) out.push(`expects ${Object.keys(t.expect).join(', ')}`);
  if (t.judge) out.push('judged against a rubric');
  if (t.tool_results) out.push(`tools answered by the test: ${Object.keys(t.tool_results).join(', ')}`);
  return out.join(' · ');
}

export function TestSuitePage({ id }) {
  const { loading, data, error, reload } = useLoad(async () => {
    const [{ test_suite: suite }, { runs }, { assistants }] = await Promise.all([get(`/test-suites/${id}`), get(`/test-suites/${id}/runs?limit=20`), get('/assistants')]);
    const workflow = suite.workflow_id ? await get(`/workflows/${suite.workflow_id}`).then((b) => b.workflow, () => null) : null;
    return { suite, runs, assistant: assistants.find((a) => a.id === suite.assistant_id) ?? null, workflow };
  }, [id]);
  const [runError, setRunError] = useState(null);
  const [busy, setBusy] = useState(false);

  const run = async () => {
    setBusy(true);
    try {
      const { run: started } = await api('POST', `/test-suites/${id}/runs`);
      setRunError(null);
      navigate(`/test-suites/${id}/runs/${started.id}`);
    } catch (err) {
      setRunError(err);
      setBusy(false);
    }
  };

  if (loading && !data) return html`<div class="page"><${PageHead} title="Test suite" /><${Loading} /></div>`;
  if (!data) return html`<div class="page"><${PageHead} title="Test suite" /><${ErrorBox} error=${error} /><p><a href="#/test-suites">Back to the test suites</a></p></div>`;
  const { suite, runs, assistant, workflow } = data;
  return html`<div class="page suite-page" data-suite=${suite.id}>
    <${PageHead} title=${suite.name} sub=${`${suite.tests.length} test${suite.tests.length === 1 ? '' : 's'} · updated ${shortWhen(suite.updated_at)}`}>
      <a class="button quiet" href="#/test-suites">All suites</a>
      <button type="button" id="run-suite" disabled=${busy} onClick=${run}>${busy ? 'Starting…' : 'Run'}</button>
    <//>
    <${ErrorBox} error=${runError} title="The run did not start" />
    <section class="panel">
      <h2>Runs</h2>
      ${runs.length
        ? html`<div class="table-wrap"><table class="list" id="run-list">
            <thead><tr><th>Started</th><th>Status</th><th>Passed</th><th>Failed</th><th class="wide-only">Took</th></tr></thead>
            <tbody>${runs.map(
              (r) => html`<tr data-run=${r.id}>
                <td><a href=${`#/test-suites/${suite.id}/runs/${r.id}`}>${shortWhen(r.created_at)}</a></td>
                <td><${RunStatus} status=${r.status} /></td>
                <td>${r.summary.passed} / ${r.summary.total}</td>
                <td>${r.summary.failed}</td>
                <td class="wide-only">${seconds(r.duration_ms)}</td>
              </tr>`,
            )}</tbody>
          </table></div>
          <div class="buttons"><button type="button" class="quiet small" onClick=${reload}>Refresh</button></div>`
        : html`<${Empty} title="Not run yet">
            <p>Press <b>Run</b> to play every test of this suite against ${assistant ? html`<b>${assistant.name}</b>` : 'its assistant'} as it is now; each test's result shows as it finishes.</p>
          <//>`}
    </section>
    <section class="panel">
      <h2>The suite</h2>
      <dl class="facts" id="suite-facts">
        <dt>assistant</dt><dd><a href=${`#/assistants/${suite.assistant_id}`}>${assistant?.name ?? suite.assistant_id}</a></dd>
        <dt>workflow</dt><dd>${suite.workflow_id ? html`<a href=${`#/workflows/${suite.workflow_id}`}>${workflow?.name ?? suite.workflow_id}</a>` : 'none (the assistant alone)'}</dd>
        <dt>llm_config</dt><dd>${suite.llm_config ? `${suite.llm_config.provider}${suite.llm_config.model ? ` ${suite.llm_config.model}` : ''}` : 'the assistant\u2019s own (simulated callers and judges)'}</dd>
      </dl>
      <h2>Tests</h2>
      <div class="table-wrap"><table class="list" id="suite-tests">
        <thead><tr><th>Name</th><th>Mode</th><th>What it checks</th></tr></thead>
        <tbody>${suite.tests.map((t) => html`<tr data-test=${t.name}><td>${t.name}</td><td>${t.mode}</td><td>${checks(t)}</td></tr>`)}</tbody>
      </table></div>
      <details><summary>The suite as JSON</summary><pre class="json">${JSON.stringify({ name: suite.name, tests: suite.tests }, null, 2)}</pre></details>
      <p class="hint">Edit it with <code>PATCH /test-suites/${suite.id}</code> (docs/test-suites.md).</p>
    </section>
  </div>`;
}
