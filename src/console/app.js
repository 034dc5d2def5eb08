// Switchboard console (docs/console.md): plain browser JavaScript, no build step.
'use strict';

const $ = (sel) => document.querySelector(sel);
const SVG = 'http://www.w3.org/2000/svg';
const KEY_STORE = 'switchboard.console.key';
const RATE = 16000;

const state = { key: sessionStorage.getItem(KEY_STORE) || '', definition: null, session: null };

function el(tag, attrs = {}, text) {
  const node = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}
const status = (text, bad = false) => { $('#status').textContent = text; $('#status').classList.toggle('bad', bad); };
const ms = (v) => (Number.isFinite(v) ? `${Math.round(v)} ms` : '—');

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${state.key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) {
    const err = new Error(`${method} ${path}: ${res.status} ${json?.error ?? ''}${json?.message ? ` (${json.message})` : ''}`);
    err.status = res.status;
    throw err;
  }
  return json;
}

/** The web call's socket on this page's own origin, as the API is (the page's policy allows no other; PUBLIC_URL may name another host). */
function onThisOrigin(url) {
  const u = new URL(url);
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${u.pathname}${u.search}`;
}

// ---- key, assistants, workflows ----------------------------------------------------------------

async function useKey(key) {
  state.key = key.trim();
  if (!state.key) return status('Enter an API key.', true);
  try {
    const [{ assistants }, { workflows }] = await Promise.all([api('GET', '/assistants'), api('GET', '/workflows')]);
    sessionStorage.setItem(KEY_STORE, state.key);
    fill($('#assistant'), assistants.map((a) => [a.id, a.name]));
    fill($('#workflow'), [['', '(none: the assistant alone)'], ...workflows.map((w) => [w.id, `${w.name}${w.is_active ? '' : ' (inactive)'}`])]);
    if (workflows.length) $('#workflow').value = workflows[0].id;
    status(`${assistants.length} assistant(s), ${workflows.length} workflow(s).`);
    setBusy(false);
    await showWorkflow();
  } catch (err) {
    if (err.status === 401) sessionStorage.removeItem(KEY_STORE);
    status(err.message, true);
  }
}

function fill(select, options) {
  select.replaceChildren(...options.map(([value, label]) => el('option', { value }, label)));
  select.disabled = false;
}

async function showWorkflow() {
  const id = $('#workflow').value;
  if (!id) {
    state.definition = { entry_node: 'assistant', nodes: [{ id: 'assistant', type: 'conversation' }], edges: [] };
    $('#graph-title').textContent = '(the assistant alone)';
  } else {
    const { workflow } = await api('GET', `/workflows/${id}`);
    state.definition = workflow.definition;
    $('#graph-title').textContent = workflow.name;
  }
  drawGraph(state.definition);
}

// ---- the graph (dagre lays it out, we draw it) ------------------------------------------------------

function wrap(text, width, maxLines) {
  const lines = [''];
  for (const word of text.split(/\s+/)) {
    const line = lines[lines.length - 1];
    if (line && (line + ' ' + word).length > width) lines.push(word);
    else lines[lines.length - 1] = line ? `${line} ${word}` : word;
  }
  if (lines.length > maxLines) lines.splice(maxLines, Infinity), (lines[maxLines - 1] += '…');
  return lines;
}

function drawGraph(def) {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'TB', nodesep: 28, ranksep: 52, edgesep: 12, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of def.nodes) {
    const sub = [n.type, n.id === def.entry_node ? 'entry' : '', n.global ? 'global' : ''].filter(Boolean).join(' · ');
    g.setNode(n.id, { node: n, sub, width: Math.max(120, n.id.length * 8.5 + 28, sub.length * 6.4 + 24), height: 46 });
  }
  def.edges.forEach((e, i) => {
    const lines = e.description ? wrap(e.description, 22, 2) : [];
    const width = lines.length ? Math.max(...lines.map((l) => l.length)) * 5.8 + 6 : 0;
    g.setEdge(e.from, e.to, { edge: e, lines, width, height: lines.length * 13, labelpos: 'c' }, `e${i}`);
  });
  dagre.layout(g);

  const svg = $('#graph');
  const { width, height } = g.graph();
  // shrunk to fit the pane down to 80% (still legible); below that the pane scrolls
  for (const [k, v] of [['viewBox', `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`], ['width', Math.ceil(width)], ['height', Math.ceil(height)]]) svg.setAttribute(k, v);
  svg.style.minWidth = `${Math.ceil(width * 0.8)}px`;
  const defs = el('svg:defs');
  for (const id of ['arrow', 'arrow-taken']) {
    const marker = el('svg:marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 10, markerHeight: 10, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' });
    marker.append(el('svg:path', { d: 'M0,0 L10,5 L0,10 z' }));
    defs.append(marker);
  }
  const edges = el('svg:g', { class: 'edges' });
  for (const ref of g.edges()) {
    const { edge, points, lines, x, y } = g.edge(ref);
    const group = el('svg:g', { class: 'edge', 'data-from': edge.from, 'data-to': edge.to });
    group.append(el('svg:path', { d: 'M' + points.map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' L'), 'marker-end': 'url(#arrow)' }));
    if (lines.length) {
      const label = el('svg:text', { x, y: y - (lines.length - 1) * 6.5 + 4, 'text-anchor': 'middle' });
      lines.forEach((line, i) => label.append(el('svg:tspan', { x, dy: i ? 13 : 0 }, line)));
      group.append(label);
    }
    if (edge.description || edge.message) group.append(el('svg:title', {}, [edge.description, edge.message && `says: ${edge.message}`].filter(Boolean).join('\n')));
    edges.append(group);
  }
  const nodes = el('svg:g', { class: 'nodes' });
  for (const id of g.nodes()) {
    const { node, sub, x, y, width: w, height: h } = g.node(id);
    const group = el('svg:g', { class: `node k-${node.type}${node.global ? ' global' : ''}`, 'data-node': id, transform: `translate(${x - w / 2},${y - h / 2})` });
    group.append(el('svg:rect', { width: w, height: h, rx: 8 }));
    group.append(el('svg:text', { x: w / 2, y: 20, class: 'id', 'text-anchor': 'middle' }, id));
    group.append(el('svg:text', { x: w / 2, y: 36, class: 'sub', 'text-anchor': 'middle' }, sub));
    const about = [node.first_line && `says: ${node.first_line}`, node.instructions, node.destination && `to ${node.destination}`, node.tool_name && `tool ${node.tool_name}`];
    group.append(el('svg:title', {}, [id, ...about.filter(Boolean)].join('\n')));
    nodes.append(group);
  }
  svg.replaceChildren(defs, edges, nodes);
}

function highlight(nodeId, visited = []) {
  for (const n of document.querySelectorAll('#graph .node')) {
    n.classList.toggle('current', n.dataset.node === nodeId);
    n.classList.toggle('visited', visited.includes(n.dataset.node));
  }
  const taken = new Set(visited.slice(1).map((to, i) => `${visited[i]}>${to}`));
  for (const e of document.querySelectorAll('#graph .edge')) {
    const on = taken.has(`${e.dataset.from}>${e.dataset.to}`);
    e.classList.toggle('taken', on);
    e.querySelector('path').setAttribute('marker-end', `url(#arrow${on ? '-taken' : ''})`);
  }
}

// ---- transcript, latency, report ----------------------------------------------------------------

function say(role, content, nodeId, when) {
  const who = { assistant: 'Assistant', user: 'Caller', tool: 'Tool', system: 'System' }[role] ?? role;
  const item = el('li', { class: `msg ${role}` });
  item.append(el('span', { class: 'who' }, who), el('span', { class: 'text' }, content));
  item.append(el('span', { class: 'meta' }, [nodeId, when].filter(Boolean).join(' · ')));
  $('#transcript').append(item);
  item.scrollIntoView({ block: 'nearest' });
}

function latencyRow(nodeId) {
  const tbody = $('#latency tbody');
  const row = el('tr');
  const cells = [tbody.children.length + 1, nodeId ?? '—', '…', '…', ''].map((v) => el('td', {}, String(v)));
  row.append(...cells);
  tbody.append(row);
  return { row, cells, browser: null, server: null };
}

function showServerSplit(t, lat) {
  t.server = lat;
  const [, node, , server, split] = t.cells;
  node.textContent = lat.node_id ?? node.textContent;
  server.textContent = ms(lat.total_ms);
  const total = Math.max(t.browser ?? 0, lat.total_ms ?? 0, 1);
  // both clocks start at the end of the turn, the page's when the `turn` message arrives: clock
  // jitter can make the page's figure a hair under the server's, which is no negative network time
  const network = t.browser === null ? null : Math.max(0, t.browser - lat.total_ms);
  const parts = [['providers', lat.provider_wait_ms], ['service', lat.service_ms], ['network', network ?? 0]];
  const bar = el('div', { class: 'bar' });
  for (const [kind, v] of parts) {
    if (!(v > 0)) continue;
    const span = el('span', { class: kind, title: `${kind} ${ms(v)}` });
    span.style.width = `${(100 * v) / total}%`; // CSSOM: the page's policy allows no style attributes
    bar.append(span);
  }
  const words = el('div', { class: 'words' },
    `providers ${ms(lat.provider_wait_ms)} (model ${ms(lat.model_wait_ms)}, TTS ${ms(lat.tts_wait_ms)}) · service ${ms(lat.service_ms)}` +
      (network === null ? '' : ` · network + buffer ${ms(network)}`));
  split.replaceChildren(bar, words);
}

async function showReport(kind, id, endedReason) {
  const box = $('#report');
  box.hidden = false;
  box.replaceChildren(el('h2', {}, `${kind} ended`));
  const facts = [['ended_reason', endedReason ?? '—']];
  if (kind === 'Call') {
    let call = null;
    for (let i = 0; i < 20 && call?.status !== 'ended'; i++) {
      if (i) await new Promise((r) => setTimeout(r, 250));
      call = (await api('GET', `/calls/${id}`).catch(() => null))?.call ?? call;
    }
    if (call) {
      const seconds = call.started_at && call.ended_at ? (Date.parse(call.ended_at) - Date.parse(call.started_at)) / 1000 : null;
      facts[0][1] = call.ended_reason ?? endedReason ?? '—';
      facts.push(['duration', seconds === null ? '—' : `${seconds.toFixed(1)} s`], ['nodes_visited', call.nodes_visited.join(' → ')]);
      if (call.errors.length) facts.push(['errors', call.errors.map((e) => (typeof e === 'string' ? e : e.message)).join('; ')]);
    }
  } else if (state.session?.chat) {
    facts.push(['nodes_visited', state.session.chat.nodes_visited.join(' → ')]);
  }
  const dl = el('dl');
  for (const [k, v] of facts) dl.append(el('dt', {}, k), el('dd', { 'data-field': k }, v));
  box.append(dl);
  return facts[0][1];
}

function resetSession(label) {
  $('#transcript').replaceChildren();
  $('#latency tbody').replaceChildren();
  $('#report').hidden = true;
  $('#session-label').textContent = label;
  highlight(null);
}

function setBusy(busy) {
  for (const id of ['#assistant', '#workflow', '#start-chat', '#start-call']) $(id).disabled = busy || !$('#assistant').value;
  $('#hangup').disabled = !busy;
}

const choice = () => ({ assistant_id: $('#assistant').value, workflow_id: $('#workflow').value || null });

// ---- chat ----------------------------------------------------------------------------------------

async function startChat() {
  resetSession('chat');
  setBusy(true);
  try {
    const { chat } = await api('POST', '/chats', choice());
    state.session = { kind: 'chat', chat };
    for (const m of chat.messages) say(m.role, m.content, m.node_id);
    highlight(chat.node_id, chat.nodes_visited);
    status(`Chat ${chat.id}`);
    if (chat.status === 'ended') return chatEnded();
    $('#say-form').hidden = false;
    $('#say-text').focus();
  } catch (err) {
    status(err.message, true);
    setBusy(false);
  }
}

async function sendChat(text) {
  const session = state.session;
  if (session?.kind !== 'chat' || !text.trim()) return;
  say('user', text, session.chat.node_id);
  $('#say-text').value = '';
  $('#say-send').disabled = true;
  const t = latencyRow(session.chat.node_id);
  const started = performance.now();
  try {
    const { chat, reply } = await api('POST', `/chats/${session.chat.id}/messages`, { text });
    t.cells[2].textContent = ms(performance.now() - started);
    t.cells[3].textContent = '—';
    t.cells[4].append(el('div', { class: 'words' }, 'reply time of the request (a chat has no audio)'));
    session.chat = chat;
    for (const m of reply) say(m.role, m.content, m.node_id);
    highlight(chat.node_id, chat.nodes_visited);
    if (chat.status === 'ended') chatEnded();
  } catch (err) {
    status(err.message, true);
  } finally {
    $('#say-send').disabled = false;
  }
}

function chatEnded() {
  $('#say-form').hidden = true;
  setBusy(false);
  status(`Chat ended: ${state.session.chat.ended_reason}`);
  showReport('Chat', state.session.chat.id, state.session.chat.ended_reason);
}

// ---- web call --------------------------------------------------------------------------------------

async function startCall() {
  resetSession('web call');
  setBusy(true);
  // made in the click, so that the browser lets it play; everything of the microphone is set up
  // before the call is made, so that a browser that cannot do it leaves no call behind
  const ctx = new AudioContext({ sampleRate: RATE });
  const audio = { stream: null, ctx, playHead: 0, sources: new Set(), marks: [] };
  let ws = null;
  try {
    void ctx.resume();
    audio.stream = await navigator.mediaDevices.getUserMedia({
      // no processing: the sandbox voice is a modem signal that noise suppression would destroy
      audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false, channelCount: 1 },
    });
    await ctx.audioWorklet.addModule('/console/mic-worklet.js');
    const mic = new AudioWorkletNode(ctx, 'mic-frames', { numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1] });
    ctx.createMediaStreamSource(audio.stream).connect(mic);
    mic.connect(ctx.destination); // it outputs silence; connected so that it is always pulled
    const { call, url } = await api('POST', '/calls/web', choice());
    ws = new WebSocket(onThisOrigin(url));
    ws.binaryType = 'arraybuffer';
    const session = (state.session = { kind: 'call', call, ws, audio, turn: null, ended: null });
    const socket = ws;
    mic.port.onmessage = (e) => socket.readyState === WebSocket.OPEN && socket.send(e.data);
    audio.timer = setInterval(() => echoMarks(session, false), 10);
    ws.onmessage = (e) => (typeof e.data === 'string' ? onControl(session, JSON.parse(e.data)) : onAudio(session, e.data));
    ws.onclose = (e) => callClosed(session, e);
    highlight(null);
    status(`Web call ${call.id}: connecting…`);
  } catch (err) {
    status(err.message, true);
    if (ws) ws.close();
    state.session = null;
    stopAudio(audio);
    setBusy(false);
  }
}

function onControl(s, m) {
  switch (m.type) {
    case 'started': return status(`Web call ${s.call.id}: in progress, talk now.`);
    case 'message': return say(m.message.role, m.message.content, m.message.node_id, `${m.message.seconds_from_start?.toFixed(1) ?? '?'} s`);
    case 'node': return highlight(m.node_id, m.nodes_visited);
    case 'turn':
      settle(s.turn);
      return void (s.turn = { t0: performance.now(), ...latencyRow(m.node_id) });
    case 'latency': return void (s.turn && !s.turn.server && showServerSplit(s.turn, m.latency));
    case 'mark': return void s.audio.marks.push({ name: m.name, at: s.audio.playHead });
    case 'clear':
      for (const src of s.audio.sources) src.stop();
      s.audio.sources.clear();
      s.audio.playHead = 0;
      return echoMarks(s, true);
    case 'transfer': return say('system', `Transfer to ${m.destination} (a web call dials nobody)`, null);
    case 'ended': return void (s.ended = m.ended_reason);
    case 'error': return status(`The server says: ${m.message}`, true);
  }
}

function onAudio(s, data) {
  const { ctx } = s.audio;
  if (s.turn && s.turn.browser === null) {
    s.turn.browser = performance.now() - s.turn.t0;
    s.turn.cells[2].textContent = ms(s.turn.browser);
    if (s.turn.server) showServerSplit(s.turn, s.turn.server);
  }
  const pcm = new DataView(data);
  const buffer = ctx.createBuffer(1, pcm.byteLength >> 1, RATE);
  const out = buffer.getChannelData(0);
  for (let i = 0; i < out.length; i++) out[i] = pcm.getInt16(2 * i, true) / 32768;
  const src = ctx.createBufferSource();
  src.buffer = buffer;
  src.connect(ctx.destination);
  // back to back; after a gap, start 40 ms ahead so that the next frames arrive in time
  const at = Math.max(s.audio.playHead, ctx.currentTime + 0.04);
  src.start(at);
  s.audio.playHead = at + buffer.duration;
  s.audio.sources.add(src);
  src.onended = () => s.audio.sources.delete(src);
}

/** A turn that got no reply audio or no figures shows a dash, not a wait. */
function settle(turn) {
  for (const cell of turn?.cells.slice(2, 4) ?? []) if (cell.textContent === '…') cell.textContent = '—';
}

/** Echo each mark once the audio before it has played (all at once with `now`, after a clear). */
function echoMarks(s, now) {
  const { marks, ctx } = s.audio;
  while (marks.length && (now || marks[0].at <= ctx.currentTime)) {
    const { name } = marks.shift();
    if (s.ws.readyState === WebSocket.OPEN) s.ws.send(JSON.stringify({ type: 'mark', name }));
  }
}

function stopAudio(audio) {
  if (!audio) return;
  clearInterval(audio.timer);
  for (const track of audio.stream?.getTracks() ?? []) track.stop();
  audio.ctx?.close().catch(() => {});
}

async function callClosed(s, event) {
  stopAudio(s.audio);
  settle(s.turn);
  setBusy(false);
  status('Web call over; getting its report…');
  const reason = await showReport('Call', s.call.id, s.ended ?? (event.code === 1000 ? null : `socket closed (${event.code})`));
  status(`Web call ended: ${reason}`);
}

function hangUp() {
  const s = state.session;
  if (s?.kind === 'call' && s.ws.readyState === WebSocket.OPEN) s.ws.send(JSON.stringify({ type: 'hangup' }));
  // still connecting: closing the socket is the hang-up
  else if (s?.kind === 'call' && s.ws.readyState === WebSocket.CONNECTING) s.ws.close();
  else if (s?.kind === 'chat') {
    $('#say-form').hidden = true;
    setBusy(false);
    status('Chat left (chats expire after 24 hours).');
  }
}

// ---- wiring ----------------------------------------------------------------------------------------

$('#key-form').addEventListener('submit', (e) => (e.preventDefault(), useKey($('#key').value)));
$('#forget-key').addEventListener('click', () => {
  sessionStorage.removeItem(KEY_STORE);
  state.key = '';
  $('#key').value = '';
  status('Key forgotten.');
});
$('#workflow').addEventListener('change', () => showWorkflow().catch((err) => status(err.message, true)));
$('#start-chat').addEventListener('click', startChat);
$('#start-call').addEventListener('click', startCall);
$('#hangup').addEventListener('click', hangUp);
$('#say-form').addEventListener('submit', (e) => (e.preventDefault(), sendChat($('#say-text').value)));
window.addEventListener('beforeunload', () => state.session?.ws?.close());
if (state.key) ($('#key').value = state.key), useKey(state.key);
