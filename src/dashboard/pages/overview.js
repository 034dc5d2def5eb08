// Overview: today's and the last 7 days' calls, by ended reason, mean duration, live calls now,
// the latest calls; with nothing yet, the first steps.
import { html } from '../html.js';
import { get } from '../api.js';
import { Badge, Empty, ErrorBox, Loading, PageHead, callSeconds, duration, shortWhen, useLoad } from '../ui.js';

const startOfToday = () => {
  const d = new Date();
  d.setHours(0, 0, 0, 0);
  return d.toISOString();
};

async function load() {
  const since7 = new Date(Date.now() - 7 * 86_400_000).toISOString();
  const [today, week, recent, assistants, workflows, numbers] = await Promise.all([
    get(`/calls/stats?since=${encodeURIComponent(startOfToday())}`),
    get(`/calls/stats?since=${encodeURIComponent(since7)}`),
    get('/calls?limit=8'),
    get('/assistants'),
    get('/workflows'),
    get('/numbers'),
  ]);
  return { today: today.stats, week: week.stats, recent: recent.calls, assistants: assistants.assistants, workflows: workflows.workflows, numbers: numbers.numbers };
}

export function Stat({ label, value, hint, id }) {
  return html`<div class="stat" data-stat=${id}><div class="stat-value">${value}</div><div class="stat-label">${label}</div>${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

export function reasonOf(c) {
  if (c.status !== 'ended') return html`<${Badge} kind="live">${c.status}<//>`;
  return html`<span class="reason">${c.ended_reason ?? '—'}</span>`;
}

export function OverviewPage() {
  const { loading, data, error, reload } = useLoad(load, []);
  if (loading && !data) return html`<div class="page"><${PageHead} title="Overview" /><${Loading} /></div>`;
  if (error) return html`<div class="page"><${PageHead} title="Overview" /><${ErrorBox} error=${error} /></div>`;
  const { today, week, recent, assistants, workflows, numbers } = data;
  const reasons = Object.entries(week.by_ended_reason).sort((a, b) => b[1] - a[1]);
  const most = Math.max(1, ...reasons.map(([, n]) => n));
  const steps = [
    [assistants.length > 0, 'Make an assistant', '#/assistants/new', 'its model, voice and transcriber (sandbox ones need no keys)'],
    [workflows.length > 0, 'Draw a workflow', '#/workflows', 'the nodes and edges of a conversation, then try it with a chat or a web call'],
    [numbers.length > 0, 'Attach a phone number', '#/numbers', 'calls to it (Twilio or a SIP trunk) run the assistant and its workflow'],
  ];
  return html`<div class="page">
    <${PageHead} title="Overview" sub="Calls of your organization, from the call log.">
      <button type="button" class="quiet" onClick=${reload}>Refresh</button>
    <//>
    <div class="stats">
      <${Stat} id="today" label="calls today" value=${today.calls} />
      <${Stat} id="week" label="calls in 7 days" value=${week.calls} />
      <${Stat} id="live" label="live now" value=${week.live} hint=${week.live ? html`<a href="#/calls?status=in-progress">see them</a>` : null} />
      <${Stat} id="duration" label="mean duration (7 days)" value=${duration(week.mean_duration_seconds)} />
      <${Stat}
        id="latency"
        label="turn latency p50 / p95 (7 days)"
        value=${week.turn_latency_ms ? `${Math.round(week.turn_latency_ms.p50)} / ${Math.round(week.turn_latency_ms.p95)} ms` : '—'}
        hint=${week.turn_latency_ms ? `over ${week.turn_latency_ms.turns} caller turns, end of turn to the reply's first audio` : 'no caller turn yet'}
      />
    </div>
    ${week.calls === 0 && recent.length === 0
      ? html`<${Empty} title="No calls yet">
          <p>Calls appear here as soon as they start: phone calls to your numbers, outbound calls, and web calls from a workflow's page.</p>
          <ol class="steps">${steps.map(([done, title, link, what]) => html`<li class=${done ? 'done' : ''}><a href=${link}>${title}</a>: ${what}${done ? ' ✓' : ''}</li>`)}</ol>
        <//>`
      : html`<div class="columns">
          <section class="panel">
            <h2>Ended reasons, last 7 days</h2>
            ${reasons.length
              ? html`<table class="bars"><tbody>${reasons.map(
                  ([reason, n]) => html`<tr data-reason=${reason}><th scope="row">${reason}</th><td class="num">${n}</td><td class="barcell"><span class="hbar" style=${{ width: `${(100 * n) / most}%` }}></span></td></tr>`,
                )}</tbody></table>`
              : html`<p class="hint">No call has ended in the last 7 days.</p>`}
          </section>
          <section class="panel">
            <h2>Latest calls <a class="more" href="#/calls">all calls</a></h2>
            <ul class="recent">${recent.map(
              (c) => html`<li><a href=${`#/calls/${c.id}`}>${shortWhen(c.created_at)}</a> <span>${c.customer?.number ?? (c.type === 'web_call' ? 'web call' : '—')}</span> ${reasonOf(c)} <span class="hint">${duration(callSeconds(c))}</span></li>`,
            )}</ul>
          </section>
        </div>`}
  </div>`;
}
