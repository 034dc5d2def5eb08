// The dashboard (DECISIONS 19, docs/dashboard.md): Preact and htm, bundled with Cytoscape and
// dagre by scripts/build.mjs (esbuild) into /console/dashboard.js. The page asks for an API key,
// keeps it in this tab's sessionStorage, and calls the API with it; nothing else is stored.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { html } from './html.js';
import { api, keyStore, setUnauthorizedHandler } from './api.js';
import { useRoute } from './router.js';
import { OverviewPage } from './pages/overview.js';
import { CallsPage } from './pages/calls.js';
import { CallPage } from './pages/call.js';
import { WorkflowsPage } from './pages/workflows.js';
import { EditorPage } from './pages/editor.js';
import { AssistantsPage } from './pages/assistants.js';
import { AssistantPage } from './pages/assistant.js';
import { NumbersPage } from './pages/numbers.js';
import { AccountPage } from './pages/account.js';
import { KeysPage } from './pages/keys.js';
import { TestSuitePage, TestSuitesPage } from './pages/test-suites.js';
import { TestRunPage } from './pages/test-run.js';

// what the browser tests (and a person debugging) can reach: the graph drawn last, the session
window.dashboard = { graph: null, session: null };

const NAV = [
  ['', 'Overview'],
  ['calls', 'Calls'],
  ['workflows', 'Workflows'],
  ['assistants', 'Assistants'],
  ['numbers', 'Numbers'],
  ['account', 'Account'],
  ['keys', 'API keys'],
  ['test-suites', 'Test suites'],
];

function KeyForm({ onKey, problem }) {
  const [key, setKey] = useState('');
  const [status, setStatus] = useState(problem ?? null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) return setStatus({ text: 'Enter an API key.', bad: true });
    setBusy(true);
    try {
      const { account } = await api('GET', '/account', undefined, { key: k });
      keyStore.set(k);
      onKey(k, account);
    } catch (err) {
      setStatus({ text: `${err.error}${err.message && err.message !== err.error ? `: ${err.message}` : ''}`, bad: true });
    } finally {
      setBusy(false);
    }
    return undefined;
  };
  return html`<main class="login">
    <form id="key-form" class="card" autocomplete="off" onSubmit=${submit}>
      <h1>Switchboard</h1>
      <p>The dashboard calls this server's API with your API key. It stays in this tab only (sessionStorage) and goes nowhere else.</p>
      <label for="key">API key</label>
      <input id="key" type="password" placeholder="sk_live_…" spellcheck="false" autocomplete="off" value=${key} onInput=${(e) => setKey(e.currentTarget.value)} />
      <button id="use-key" type="submit" disabled=${busy}>Use key</button>
      <p id="status" role="status" class=${status?.bad ? 'status bad' : 'status'}>${status?.text ?? 'Enter an API key: it stays in this tab only.'}</p>
      <details>
        <summary>Where do I get one?</summary>
        <p><code>npm start</code> prints a development key on its first start (the embedded database). Otherwise make one with
          <code>npm run keys -- create --org "Your company"</code>, or on the API keys page once you are in.</p>
      </details>
    </form>
  </main>`;
}

function Page({ route, account, onForget }) {
  const [first, second, third, fourth] = route.parts;
  const q = route.query;
  switch (first ?? '') {
    case '':
      return html`<${OverviewPage} />`;
    case 'calls':
      return second ? html`<${CallPage} id=${second} />` : html`<${CallsPage} query=${q} />`;
    case 'workflows':
      return second ? html`<${EditorPage} id=${second} />` : html`<${WorkflowsPage} />`;
    case 'assistants':
      return second ? html`<${AssistantPage} id=${second} />` : html`<${AssistantsPage} />`;
    case 'numbers':
      return html`<${NumbersPage} />`;
    case 'account':
      return html`<${AccountPage} account=${account} />`;
    case 'keys':
      return html`<${KeysPage} onOwnKeyRevoked=${onForget} />`;
    case 'test-suites':
      if (second && third === 'runs' && fourth) return html`<${TestRunPage} suiteId=${second} runId=${fourth} />`;
      return second ? html`<${TestSuitePage} id=${second} />` : html`<${TestSuitesPage} />`;
    default:
      return html`<div class="page"><h1>No such page</h1><p><a href="#/">Go to the overview</a></p></div>`;
  }
}

function App() {
  const route = useRoute();
  const [session, setSession] = useState({ key: keyStore.get(), account: null, checked: false, problem: null });
  const [menu, setMenu] = useState(false);

  const forget = (problem = { text: 'Key forgotten.', bad: false }) => {
    keyStore.forget();
    window.dashboard.session?.ws?.close();
    setSession({ key: '', account: null, checked: true, problem });
  };
  useEffect(() => {
    setUnauthorizedHandler((err) => forget({ text: `${err.error}: ${err.message}`, bad: true }));
    // a key kept from before: the page needs no typing after a reload
    if (!session.key) return setSession((s) => ({ ...s, checked: true }));
    api('GET', '/account')
      .then(({ account }) => setSession((s) => ({ ...s, account, checked: true })))
      .catch((err) => (err.status === 401 ? forget({ text: `${err.error}: ${err.message}`, bad: true }) : setSession((s) => ({ ...s, checked: true, problem: { text: err.message, bad: true } }))));
    return undefined;
  }, []);
  useEffect(() => setMenu(false), [route]);

  if (!session.key) return html`<${KeyForm} problem=${session.problem} onKey=${(key, account) => setSession({ key, account, checked: true, problem: null })} />`;
  if (!session.checked) return html`<p class="loading">Loading…</p>`;
  const current = route.parts[0] ?? '';
  return html`<div class="shell">
    <header class="top">
      <a class="brand" href="#/">Switchboard</a>
      <span class="org" title="Your organization">${session.account?.name ?? ''}</span>
      <button type="button" class="menu-toggle quiet" aria-expanded=${menu} aria-controls="nav" onClick=${() => setMenu(!menu)}>Menu</button>
      <button id="forget-key" type="button" class="quiet" onClick=${() => forget()}>Forget key</button>
    </header>
    <nav id="nav" class=${menu ? 'open' : ''} aria-label="Pages">
      ${NAV.map(([path, label]) => html`<a href=${`#/${path}`} aria-current=${current === path ? 'page' : undefined} data-page=${path || 'overview'}>${label}</a>`)}
    </nav>
    <main id="page"><${Page} route=${route} account=${session.account} onForget=${() => forget({ text: 'The key this tab used was revoked; enter another.', bad: false })} /></main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
