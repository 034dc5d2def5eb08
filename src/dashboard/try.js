// Try a workflow (or an assistant alone) as today's console did: a chat typed line by line, or a
// web call with the microphone; the transcript with node and time, the current node lit on the
// graph (through `onNode`), each turn's latency and its split, and the report at the end.
import { useEffect, useRef, useState } from 'preact/hooks';
import { html } from './html.js';
import { api, detailsFor, unclaimed } from './api.js';
import { CallAudio, onThisOrigin } from './webcall.js';
import { ErrorBox, Field, isSandboxAssistant, ms } from './ui.js';

const WHO = { assistant: 'Assistant', user: 'Caller', tool: 'Tool', system: 'System' };

function Transcript({ lines }) {
  const list = useRef(null);
  useEffect(() => {
    const last = list.current?.lastElementChild;
    if (last && typeof last.scrollIntoView === 'function') last.scrollIntoView({ block: 'nearest' });
  }, [lines.length]);
  return html`<ol id="transcript" ref=${list} aria-live="polite">
    ${lines.map(
      (l, i) => html`<li key=${i} class=${`msg ${l.role}`}>
        <span class="who">${WHO[l.role] ?? l.role}</span><span class="text">${l.content}</span><span class="meta">${[l.node, l.when].filter(Boolean).join(' · ')}</span>
      </li>`,
    )}
  </ol>`;
}

function Split({ row }) {
  const lat = row.server;
  if (row.words) return html`<div class="words">${row.words}</div>`;
  if (!lat) return null;
  const total = Math.max(row.browser ?? 0, lat.total_ms ?? 0, 1);
  // both clocks start at the end of the turn, the page's when the `turn` message arrives: clock
  // jitter can make the page's figure a hair under the server's, which is no negative network time
  const network = row.browser === null ? null : Math.max(0, row.browser - lat.total_ms);
  const parts = [['providers', lat.provider_wait_ms], ['service', lat.service_ms], ['network', network ?? 0]].filter(([, v]) => v > 0);
  return html`<div>
    <div class="bar">${parts.map(([kind, v]) => html`<span class=${kind} title=${`${kind} ${ms(v)}`} style=${{ width: `${(100 * v) / total}%` }}></span>`)}</div>
    <div class="words">
      providers ${ms(lat.provider_wait_ms)} (model ${ms(lat.model_wait_ms)}, TTS ${ms(lat.tts_wait_ms)}) · service ${ms(lat.service_ms)}${network === null ? '' : ` · network + buffer ${ms(network)}`}
    </div>
  </div>`;
}

/**
 * `assistants`: the organization's; `workflowId`: the workflow to run (null: the assistant alone);
 * `assistantId`: a fixed assistant (the assistant's own page) instead of a choice.
 */
export function TryPanel({ assistants, workflowId, assistantId: fixed = null, onNode, note }) {
  const [assistantId, setAssistantId] = useState(fixed ?? assistants[0]?.id ?? '');
  const [lines, setLines] = useState([]);
  const [rows, setRows] = useState([]);
  const [report, setReport] = useState(null);
  const [status, setStatus] = useState({ text: 'Start a chat (typed) or a web call (your microphone).', bad: false });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [chatOpen, setChatOpen] = useState(false);
  const [sayText, setSayText] = useState('');
  const [sending, setSending] = useState(false);
  const session = useRef(null);
  const sayInput = useRef(null);

  useEffect(() => {
    if (!fixed && !assistants.some((a) => a.id === assistantId)) setAssistantId(assistants[0]?.id ?? '');
  }, [assistants]);
  useEffect(() => () => session.current?.ws?.close(), []);
  useEffect(() => {
    if (chatOpen) sayInput.current?.focus();
  }, [chatOpen]);

  const say = (role, content, node, when) => setLines((ls) => [...ls, { role, content, node, when }]);
  const light = (node, visited) => onNode?.(node, visited ?? []);
  const choice = () => ({ assistant_id: fixed ?? assistantId, workflow_id: workflowId ?? null });
  const reset = () => {
    setLines([]);
    setRows([]);
    setReport(null);
    setError(null);
    light(null, []);
  };
  const fail = (err) => {
    setError(err);
    setStatus({ text: err.error ? `${err.error}${err.message && err.message !== err.error ? `: ${err.message}` : ''}` : err.message, bad: true });
  };

  // ---- chat ----
  async function startChat() {
    reset();
    setBusy(true);
    try {
      const { chat } = await api('POST', '/chats', choice());
      session.current = { kind: 'chat', chat };
      window.dashboard.session = session.current;
      for (const m of chat.messages) say(m.role, m.content, m.node_id);
      light(chat.node_id, chat.nodes_visited);
      setStatus({ text: `Chat ${chat.id}`, bad: false });
      if (chat.status === 'ended') return chatEnded(chat);
      setChatOpen(true);
    } catch (err) {
      fail(err);
      setBusy(false);
    }
    return undefined;
  }

  async function sendChat(e) {
    e.preventDefault();
    const s = session.current;
    const text = sayText;
    if (s?.kind !== 'chat' || !text.trim()) return;
    say('user', text, s.chat.node_id);
    setSayText('');
    setSending(true);
    const n = rows.length;
    setRows((rs) => [...rs, { node: s.chat.node_id, browser: null, server: null, serverText: '…' }]);
    const started = performance.now();
    try {
      const { chat, reply } = await api('POST', `/chats/${s.chat.id}/messages`, { text });
      const took = performance.now() - started;
      setRows((rs) => rs.map((r, i) => (i === n ? { ...r, browser: took, serverText: '—', words: 'reply time of the request (a chat has no audio)' } : r)));
      s.chat = chat;
      for (const m of reply) say(m.role, m.content, m.node_id);
      light(chat.node_id, chat.nodes_visited);
      if (chat.status === 'ended') chatEnded(chat);
    } catch (err) {
      fail(err);
    } finally {
      setSending(false);
    }
  }

  function chatEnded(chat) {
    setChatOpen(false);
    setBusy(false);
    setStatus({ text: `Chat ended: ${chat.ended_reason}`, bad: false });
    setReport({ kind: 'Chat', facts: [['ended_reason', chat.ended_reason ?? '—'], ['nodes_visited', chat.nodes_visited.join(' → ')]] });
  }

  // ---- web call ----
  async function startCall() {
    reset();
    setBusy(true);
    let audio;
    let ws = null;
    try {
      audio = new CallAudio();
      await audio.open();
      const { call, url } = await api('POST', '/calls/web', choice());
      ws = new WebSocket(onThisOrigin(url));
      ws.binaryType = 'arraybuffer';
      const s = { kind: 'call', call, ws, audio, turn: null, ended: null };
      session.current = s;
      window.dashboard.session = s;
      audio.attach(ws);
      ws.onmessage = (e) => (typeof e.data === 'string' ? onControl(s, JSON.parse(e.data)) : onAudio(s, e.data));
      ws.onclose = (e) => callClosed(s, e);
      setStatus({ text: `Web call ${call.id}: connecting…`, bad: false });
    } catch (err) {
      fail(err.status !== undefined ? err : { error: 'The microphone could not be used', message: err.message });
      if (ws) ws.close();
      session.current = null;
      audio?.close();
      setBusy(false);
    }
  }

  function newTurn(s, node) {
    settle(s);
    s.turnCount = (s.turnCount ?? 0) + 1;
    s.turn = { t0: performance.now(), index: s.turnCount - 1, browser: null, server: null };
    setRows((rs) => [...rs, { node, browser: null, server: null, serverText: '…' }]);
  }

  function updateRow(s, patch) {
    const i = s.turn.index;
    setRows((rs) => rs.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  }

  /** A turn that got no reply audio or no figures shows a dash, not a wait. */
  function settle(s) {
    if (!s.turn) return;
    const i = s.turn.index;
    setRows((rs) => rs.map((r, j) => (j === i ? { ...r, browserText: r.browser === null ? '—' : undefined, serverText: r.server ? undefined : '—' } : r)));
  }

  function onControl(s, m) {
    switch (m.type) {
      case 'started':
        return setStatus({ text: `Web call ${s.call.id}: in progress, talk now.`, bad: false });
      case 'message':
        return say(m.message.role, m.message.content, m.message.node_id, `${m.message.seconds_from_start?.toFixed(1) ?? '?'} s`);
      case 'node':
        return light(m.node_id, m.nodes_visited);
      case 'turn':
        return newTurn(s, m.node_id);
      case 'latency':
        if (s.turn && !s.turn.server) {
          s.turn.server = m.latency;
          updateRow(s, { server: m.latency, node: m.latency.node_id ?? undefined, serverText: undefined });
        }
        return undefined;
      case 'mark':
        return s.audio.mark(m.name);
      case 'clear':
        return s.audio.clear();
      case 'transfer':
        return say('system', `Transfer to ${m.destination} (a web call dials nobody)`, null);
      case 'ended':
        s.ended = m.ended_reason;
        return undefined;
      case 'error':
        return setStatus({ text: `The server says: ${m.message}`, bad: true });
      default:
        return undefined;
    }
  }

  function onAudio(s, data) {
    if (s.turn && s.turn.browser === null) {
      s.turn.browser = performance.now() - s.turn.t0;
      updateRow(s, { browser: s.turn.browser });
    }
    s.audio.play(data);
  }

  async function callClosed(s, event) {
    s.audio.close();
    settle(s);
    setBusy(false);
    setStatus({ text: 'Web call over; getting its report…', bad: false });
    let call = null;
    for (let i = 0; i < 20 && call?.status !== 'ended'; i++) {
      if (i) await new Promise((r) => setTimeout(r, 250));
      call = (await api('GET', `/calls/${s.call.id}`).catch(() => null))?.call ?? call;
    }
    const reason = call?.ended_reason ?? s.ended ?? (event.code === 1000 ? null : `socket closed (${event.code})`) ?? '—';
    const facts = [['ended_reason', reason]];
    if (call) {
      const seconds = call.started_at && call.ended_at ? (Date.parse(call.ended_at) - Date.parse(call.started_at)) / 1000 : null;
      facts.push(['duration', seconds === null ? '—' : `${seconds.toFixed(1)} s`], ['nodes_visited', call.nodes_visited.join(' → ')]);
      if (call.errors.length) facts.push(['errors', call.errors.map((e) => (typeof e === 'string' ? e : e.message)).join('; ')]);
    }
    setReport({ kind: 'Call', facts, callId: s.call.id });
    setStatus({ text: `Web call ended: ${reason}`, bad: false });
  }

  function hangUp() {
    const s = session.current;
    if (s?.kind === 'call' && s.ws.readyState === WebSocket.OPEN) s.ws.send(JSON.stringify({ type: 'hangup' }));
    // still connecting: closing the socket is the hang-up
    else if (s?.kind === 'call' && s.ws.readyState === WebSocket.CONNECTING) s.ws.close();
    else if (s?.kind === 'chat') {
      setChatOpen(false);
      setBusy(false);
      setStatus({ text: 'Chat left (chats expire after 24 hours).', bad: false });
    }
  }

  const chosen = assistants.find((a) => a.id === (fixed ?? assistantId));
  const fieldPaths = ['assistant_id', 'workflow_id', 'llm_config', 'stt_config', 'tts_config', 'variables'];
  const assistantProblems = [...detailsFor(error, 'assistant_id'), ...detailsFor(error, 'llm_config'), ...detailsFor(error, 'stt_config'), ...detailsFor(error, 'tts_config')];
  return html`<section class="try" aria-label="Try it">
    <h2>Try it ${note ? html`<span class="hint">${note}</span>` : null}</h2>
    <div class="try-controls">
      ${fixed
        ? null
        : html`<${Field} label="Assistant" extra=${assistantProblems}>
            ${({ id, describedBy }) => html`<select id="assistant" aria-describedby=${describedBy} value=${assistantId} disabled=${busy || !assistants.length} onChange=${(e) => setAssistantId(e.currentTarget.value)}>
              ${assistants.map((a) => html`<option value=${a.id}>${a.name}${isSandboxAssistant(a) && !/sandbox/i.test(a.name) ? ' (sandbox)' : ''}</option>`)}
            </select>`}
          <//>`}
      <div class="buttons">
        <button id="start-chat" type="button" disabled=${busy || !(fixed ?? assistantId)} onClick=${startChat}>Start chat</button>
        <button id="start-call" type="button" disabled=${busy || !(fixed ?? assistantId)} onClick=${startCall}>Start web call</button>
        <button id="hangup" type="button" class="danger" disabled=${!busy} onClick=${hangUp}>Hang up</button>
      </div>
    </div>
    ${fixed && assistantProblems.length ? html`<ul class="problems" role="alert">${assistantProblems.map((d) => html`<li>${d}</li>`)}</ul>` : null}
    ${!assistants.length && !fixed ? html`<p class="hint">Make an assistant first (<a href="#/assistants/new">new assistant</a>): a chat or a call needs one.</p>` : null}
    ${chosen && isSandboxAssistant(chosen) ? html`<p class="hint">Sandbox providers: the "model" matches words and the voice is modem audio (docs/sandbox.md).</p>` : null}
    <p id="try-status" class=${status.bad ? 'status bad' : 'status'} role="status">${status.text}</p>
    <${ErrorBox} error=${error} details=${error ? unclaimed(error, fieldPaths) : []} title=${error?.error} />
    <h3>Transcript <span class="hint">${session.current?.kind === 'call' ? 'web call' : session.current?.kind ?? ''}</span></h3>
    <${Transcript} lines=${lines} />
    ${chatOpen
      ? html`<form id="say-form" onSubmit=${sendChat}>
          <input id="say-text" ref=${sayInput} aria-label="The customer's message" placeholder="Type the customer's message" maxlength="4000" autocomplete="off" value=${sayText} onInput=${(e) => setSayText(e.currentTarget.value)} />
          <button id="say-send" type="submit" disabled=${sending}>Send</button>
        </form>`
      : null}
    <h3>Latency <span class="hint">end of the caller's turn → first reply audio</span></h3>
    <div class="table-wrap">
      <table id="latency">
        <thead><tr><th>#</th><th>node</th><th>at browser</th><th>server</th><th>split</th></tr></thead>
        <tbody>
          ${rows.map(
            (r, i) => html`<tr key=${i}>
              <td>${i + 1}</td><td>${r.server?.node_id ?? r.node ?? '—'}</td>
              <td>${r.browser !== null ? ms(r.browser) : r.browserText ?? '…'}</td>
              <td>${r.server ? ms(r.server.total_ms) : r.serverText ?? '…'}</td>
              <td><${Split} row=${r} /></td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
    <p class="legend"><i class="sw providers"></i>providers (model, TTS) <i class="sw service"></i>service <i class="sw network"></i>network + buffer</p>
    ${report
      ? html`<div id="report">
          <h3>${report.kind} ended ${report.callId ? html`<a href=${`#/calls/${report.callId}`}>open the call</a>` : null}</h3>
          <dl>${report.facts.map(([k, v]) => html`<dt>${k}</dt><dd data-field=${k}>${v}</dd>`)}</dl>
        </div>`
      : null}
  </section>`;
}
