// Calls: the call log with every filter of GET /calls and a search by customer number, a page at
// a time; the first page refreshes itself while it is shown (new and live calls appear).
import { useEffect, useRef, useState } from 'preact/hooks';
import { html } from '../html.js';
import { get } from '../api.js';
import { navigate } from '../router.js';
import { Empty, ErrorBox, Field, Loading, PageHead, Select, callSeconds, duration, shortWhen, useLoad } from '../ui.js';
import { reasonOf } from './overview.js';

const STATUSES = ['queued', 'ringing', 'in-progress', 'forwarding', 'ended'];
const TYPES = [['inbound_phone_call', 'inbound'], ['outbound_phone_call', 'outbound'], ['web_call', 'web']];
const FILTERS = ['status', 'type', 'assistant_id', 'number_id', 'since', 'until', 'customer'];
const REFRESH_MS = 5000;

/** yyyy-mm-dd of a date input → the ISO instant of that local midnight (until: the next one). */
const dayStart = (day, next = false) => {
  if (!day) return undefined;
  const d = new Date(`${day}T00:00:00`);
  if (next) d.setDate(d.getDate() + 1);
  return d.toISOString();
};

export function CallsPage({ query }) {
  const filters = Object.fromEntries(FILTERS.map((f) => [f, query[f] ?? '']));
  const [search, setSearch] = useState(filters.customer);
  const [cursors, setCursors] = useState([null]);
  const page = cursors.length - 1;
  const refs = useLoad(async () => {
    const [a, n] = await Promise.all([get('/assistants'), get('/numbers')]);
    return { assistants: a.assistants, numbers: n.numbers };
  }, []);
  const key = FILTERS.map((f) => filters[f]).join('|');
  useEffect(() => setCursors([null]), [key]);
  useEffect(() => setSearch(filters.customer), [filters.customer]);

  const listing = useLoad(async () => {
    const q = new URLSearchParams({ limit: '25' });
    for (const f of ['status', 'type', 'assistant_id', 'number_id', 'customer']) if (filters[f]) q.set(f, filters[f]);
    if (filters.since) q.set('since', dayStart(filters.since));
    if (filters.until) q.set('until', dayStart(filters.until, true));
    if (cursors[page]) q.set('cursor', cursors[page]);
    return get(`/calls?${q}`);
  }, [key, cursors]);

  // the first page, and any page with a live call, refreshes itself
  const reload = useRef(listing.reload);
  reload.current = listing.reload;
  const live = listing.data?.calls.some((c) => c.status !== 'ended');
  useEffect(() => {
    if (page !== 0 && !live) return undefined;
    const t = setInterval(() => document.visibilityState === 'visible' && reload.current(), REFRESH_MS);
    return () => clearInterval(t);
  }, [page, live]);

  const set = (f, v) => navigate('/calls', { ...filters, [f]: v || undefined });
  const onSearch = (e) => {
    e.preventDefault();
    set('customer', search.replace(/[^\d+]/g, ''));
  };
  const assistants = refs.data?.assistants ?? [];
  const numbers = refs.data?.numbers ?? [];
  const nameOf = (id) => assistants.find((a) => a.id === id)?.name ?? (id ? id.slice(0, 8) : '—');
  const filtered = FILTERS.some((f) => filters[f]);
  const calls = listing.data?.calls ?? [];

  return html`<div class="page">
    <${PageHead} title="Calls" sub="Every call kept in the call log, newest first." />
    <form class="filters" onSubmit=${onSearch} role="search">
      <${Field} label="Customer number" path="query.customer" error=${listing.error}>
        ${({ id }) => html`<input id=${id} name="customer" type="search" inputmode="tel" placeholder="digits, e.g. 415555" value=${search} onInput=${(e) => setSearch(e.currentTarget.value)} />`}
      <//>
      <button type="submit">Search</button>
      <${Field} label="Status">${({ id }) => html`<${Select} id=${id} name="status" value=${filters.status} empty="any" options=${STATUSES.map((s) => [s, s])} onChange=${(v) => set('status', v)} />`}<//>
      <${Field} label="Type">${({ id }) => html`<${Select} id=${id} name="type" value=${filters.type} empty="any" options=${TYPES} onChange=${(v) => set('type', v)} />`}<//>
      <${Field} label="Assistant">${({ id }) => html`<${Select} id=${id} name="assistant_id" value=${filters.assistant_id} empty="any" options=${assistants.map((a) => [a.id, a.name])} onChange=${(v) => set('assistant_id', v)} />`}<//>
      <${Field} label="Number">${({ id }) => html`<${Select} id=${id} name="number_id" value=${filters.number_id} empty="any" options=${numbers.map((n) => [n.id, n.name ? `${n.number} (${n.name})` : n.number])} onChange=${(v) => set('number_id', v)} />`}<//>
      <${Field} label="From" path="query.since" error=${listing.error}>${({ id }) => html`<input id=${id} name="since" type="date" value=${filters.since} onChange=${(e) => set('since', e.currentTarget.value)} />`}<//>
      <${Field} label="To" path="query.until" error=${listing.error}>${({ id }) => html`<input id=${id} name="until" type="date" value=${filters.until} onChange=${(e) => set('until', e.currentTarget.value)} />`}<//>
      ${filtered ? html`<button type="button" class="quiet" onClick=${() => navigate('/calls')}>Clear filters</button>` : null}
    </form>
    ${listing.error ? html`<${ErrorBox} error=${listing.error} />` : null}
    ${listing.loading && !listing.data ? html`<${Loading} />` : null}
    ${listing.data && calls.length === 0
      ? filtered
        ? html`<${Empty} title="No call matches these filters"><p>Widen the dates, or <a href="#/calls">clear the filters</a>.</p><//>`
        : html`<${Empty} title="No calls yet">
            <p>Calls appear here as they start. Try a workflow with a web call from its page (<a href="#/workflows">Workflows</a>), or attach a number to an assistant (<a href="#/numbers">Numbers</a>) and call it.</p>
          <//>`
      : null}
    ${calls.length
      ? html`<div class="table-wrap"><table class="list calls" id="call-list">
          <thead><tr><th>When</th><th>Type</th><th>Customer</th><th class="wide-only">Number</th><th class="wide-only">Assistant</th><th>Status</th><th>Duration</th><th class="wide-only">Nodes</th></tr></thead>
          <tbody>${calls.map(
            (c) => html`<tr key=${c.id} data-call=${c.id} class=${c.status !== 'ended' ? 'live' : ''}>
              <td><a href=${`#/calls/${c.id}`}>${shortWhen(c.created_at)}</a></td>
              <td>${c.type.replace('_phone_call', '').replace('_call', '')}</td>
              <td>${c.customer?.number ?? '—'}</td>
              <td class="wide-only">${c.phone_number?.number ?? '—'}</td>
              <td class="wide-only">${nameOf(c.assistant_id)}</td>
              <td>${reasonOf(c)}</td>
              <td>${duration(callSeconds(c))}</td>
              <td class="wide-only nodes">${c.nodes_visited.join(' → ')}</td>
            </tr>`,
          )}</tbody>
        </table></div>
        <div class="pager">
          <button type="button" class="quiet" disabled=${page === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>Newer</button>
          <span class="hint">page ${page + 1}${page === 0 ? ` · refreshes every ${REFRESH_MS / 1000} s` : ''}</span>
          <button type="button" class="quiet" disabled=${!listing.data?.next_cursor} onClick=${() => setCursors([...cursors, listing.data.next_cursor])}>Older</button>
        </div>`
      : null}
  </div>`;
}
