// The workflow editor: the graph (Cytoscape) to add, connect, move and delete nodes, the side
// panel for every field, Save (PATCH /workflows/{id} with the definition and its layout) showing
// each validation problem on its node or edge, and Try it (a chat or a web call) on the saved
// workflow with the current node lit.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { html } from '../html.js';
import { api, get, splitDetail } from '../api.js';
import { navigate } from '../router.js';
import { Graph, positions } from '../graph.js';
import { TryPanel } from '../try.js';
import { Badge, ConfirmButton, ErrorBox, Loading, PageHead, Select } from '../ui.js';
import { EdgeInspector, NODE_TYPES, NodeInspector, TYPE_FIELDS, WorkflowInspector } from './inspector.js';

const edgeKey = (e) => `${e.from}>${e.to}`;
const NODE_PATH = /^(?:definition\.)?nodes\[(\d+)\](?:[.[](.*))?$/;
const EDGE_PATH = /^(?:definition\.)?edges\[(\d+)\](?:[.[](.*))?$/;

/** A save's refusal, sorted: by node id, by edge (from>to), the workflow's own fields, the rest. */
export function problemsFrom(error, sent) {
  const out = { nodes: {}, edges: {}, workflow: [], general: [], count: 0 };
  if (!error?.details?.length) return out;
  const push = (map, key, d) => (map[key] ??= []).push(d);
  for (const detail of error.details) {
    out.count++;
    const { path, text } = splitDetail(detail);
    const rel = (rest) => (rest ? `${rest.startsWith('[') ? rest : rest}: ${text}` : text);
    let m;
    if (path && (m = NODE_PATH.exec(path)) && sent?.nodes?.[m[1]]) {
      const rest = m[2] === undefined ? '' : path.slice(path.indexOf(']') + 2);
      push(out.nodes, String(sent.nodes[m[1]].id), rel(rest));
    } else if (path && (m = EDGE_PATH.exec(path)) && sent?.edges?.[m[1]]) {
      const rest = m[2] === undefined ? '' : path.slice(path.indexOf(']') + 2);
      push(out.edges, edgeKey(sent.edges[m[1]]), rel(rest));
    } else if (path && /^(?:definition\.)?(entry_node|global_prompt)\b/.test(path)) {
      out.workflow.push(detail.replace(/^definition\./, ''));
    } else if (path && /^name\b/.test(path)) {
      out.workflow.push(detail);
    } else out.general.push(detail);
  }
  return out;
}

/** The problems of one node or edge as an error its fields can show: those with a field path, and those about it as a whole. */
const asError = (list = []) => ({
  details: list.filter((d) => splitDetail(d).path !== null),
  nodeProblems: list.filter((d) => splitDetail(d).path === null),
});

const baselineOf = (w) => ({ name: w.name, is_active: w.is_active, definition: w.definition, layout: positions(w.definition, w.layout) });

/** The first place from `start` (rightwards, then the rows below) where no node is drawn already. */
export function freeSpot(layout, start) {
  const taken = Object.values(layout);
  const clear = (p) => taken.every((q) => Math.abs(q.x - p.x) > 170 || Math.abs(q.y - p.y) > 80);
  for (let row = 0; row < 50; row++) {
    for (let col = 0; col < 8; col++) {
      const p = { x: Math.round(start.x + col * 180), y: Math.round(start.y + row * 100) };
      if (clear(p)) return p;
    }
  }
  return start;
}

function uniqueId(definition, type) {
  for (let i = 1; ; i++) {
    const id = `${type}_${i}`;
    if (!definition.nodes.some((n) => n.id === id)) return id;
  }
}

export function EditorPage({ id }) {
  const [saved, setSaved] = useState(null);
  const [draft, setDraft] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [selected, setSelected] = useState(null);
  const [connectFrom, setConnectFrom] = useState(null);
  const [problems, setProblems] = useState(null);
  const [saveError, setSaveError] = useState(null);
  const [saving, setSaving] = useState(false);
  const [notice, setNotice] = useState(null);
  const [newType, setNewType] = useState('conversation');
  const [assistants, setAssistants] = useState([]);
  const [lit, setLit] = useState({ current: null, visited: [] });

  useEffect(() => {
    setSaved(null);
    setDraft(null);
    get(`/workflows/${id}`)
      .then(({ workflow }) => {
        const base = baselineOf(workflow);
        setSaved({ ...workflow, base });
        setDraft(base);
      })
      .catch(setLoadError);
    get('/assistants')
      .then(({ assistants: a }) => setAssistants(a))
      .catch(() => setAssistants([]));
  }, [id]);

  const dirty = useMemo(() => saved && draft && JSON.stringify(draft) !== JSON.stringify(saved.base), [draft, saved]);
  useEffect(() => {
    if (!dirty) return undefined;
    const warn = (e) => e.preventDefault();
    window.addEventListener('beforeunload', warn);
    return () => window.removeEventListener('beforeunload', warn);
  }, [dirty]);

  if (loadError) return html`<div class="page"><${PageHead} title="Workflow" /><${ErrorBox} error=${loadError} /><p><a href="#/workflows">All workflows</a></p></div>`;
  if (!draft) return html`<div class="page"><${PageHead} title="Workflow" /><${Loading} /></div>`;

  const def = draft.definition;
  const change = (patch) => {
    setNotice(null);
    setDraft((d) => ({ ...d, ...patch }));
  };
  const setDef = (fn) => change({ definition: fn(draft.definition) });

  // ---- nodes ----
  const addNode = () => {
    const nodeId = uniqueId(def, newType);
    const cy = window.dashboard.graph;
    const from = selected?.kind === 'node' ? draft.layout[selected.id] : null;
    let at = { x: 0, y: 0 };
    if (from) at = { x: from.x, y: from.y + 110 };
    else if (cy) {
      const e = cy.extent();
      at = { x: Math.round((e.x1 + e.x2) / 2), y: Math.round((e.y1 + e.y2) / 2) };
    }
    change({
      definition: { ...def, nodes: [...def.nodes, { id: nodeId, type: newType }] },
      layout: { ...draft.layout, [nodeId]: freeSpot(draft.layout, at) },
    });
    setSelected({ kind: 'node', id: nodeId });
  };
  const updateNode = (nodeId, patch) =>
    setDef((d) => ({
      ...d,
      nodes: d.nodes.map((n) => {
        if (n.id !== nodeId) return n;
        const next = { ...n, ...patch };
        for (const [k, v] of Object.entries(patch)) if (v === undefined) delete next[k];
        return next;
      }),
    }));
  const renameNode = (from, to) => {
    if (!to || def.nodes.some((n) => n.id === to)) {
      setNotice({ text: to ? `There is already a node "${to}".` : 'A node needs an id.', bad: true });
      return;
    }
    const layout = { ...draft.layout, [to]: draft.layout[from] };
    delete layout[from];
    change({
      definition: {
        ...def,
        entry_node: def.entry_node === from ? to : def.entry_node,
        nodes: def.nodes.map((n) => (n.id === from ? { ...n, id: to } : n)),
        edges: def.edges.map((e) => ({ ...e, from: e.from === from ? to : e.from, to: e.to === from ? to : e.to })),
      },
      layout,
    });
    setSelected({ kind: 'node', id: to });
  };
  const changeType = (nodeId, type) =>
    setDef((d) => ({
      ...d,
      nodes: d.nodes.map((n) => {
        if (n.id !== nodeId) return n;
        const keep = new Set([...TYPE_FIELDS[type], ...Object.keys(n).filter((k) => !Object.values(TYPE_FIELDS).flat().includes(k))]);
        return { ...Object.fromEntries(Object.entries(n).filter(([k]) => keep.has(k))), type };
      }),
    }));
  const deleteNode = (nodeId) => {
    const nodes = def.nodes.filter((n) => n.id !== nodeId);
    if (!nodes.length) return setNotice({ text: 'A workflow needs at least one node.', bad: true });
    const layout = { ...draft.layout };
    delete layout[nodeId];
    change({
      definition: { ...def, nodes, edges: def.edges.filter((e) => e.from !== nodeId && e.to !== nodeId), entry_node: def.entry_node === nodeId ? nodes[0].id : def.entry_node },
      layout,
    });
    setSelected(null);
    return undefined;
  };
  const move = (nodeId, pos) => setDraft((d) => ({ ...d, layout: { ...d.layout, [nodeId]: pos } }));

  // ---- edges ----
  const addEdge = (from, to) => {
    setConnectFrom(null);
    const existing = def.edges.findIndex((e) => e.from === from && e.to === to);
    if (existing >= 0) return setSelected({ kind: 'edge', index: existing });
    change({ definition: { ...def, edges: [...def.edges, { from, to }] } });
    setSelected({ kind: 'edge', index: def.edges.length });
    return undefined;
  };
  const updateEdge = (i, patch) =>
    setDef((d) => ({
      ...d,
      edges: d.edges.map((e, j) => {
        if (j !== i) return e;
        const next = { ...e, ...patch };
        for (const [k, v] of Object.entries(patch)) if (v === undefined) delete next[k];
        return next;
      }),
    }));
  const deleteEdge = (i) => {
    setDef((d) => ({ ...d, edges: d.edges.filter((_, j) => j !== i) }));
    setSelected(null);
  };

  const onDelete = (sel) => (sel.kind === 'node' ? deleteNode(sel.id) : deleteEdge(sel.index));

  // ---- save ----
  const save = async () => {
    setSaving(true);
    setNotice(null);
    const sent = draft.definition;
    try {
      const { workflow } = await api('PATCH', `/workflows/${id}`, { name: draft.name, is_active: draft.is_active, definition: sent, layout: draft.layout });
      const base = baselineOf(workflow);
      setSaved({ ...workflow, base });
      setDraft(base);
      setProblems(null);
      setSaveError(null);
      setNotice({ text: `Saved at ${new Date().toLocaleTimeString()}.`, bad: false });
    } catch (err) {
      setSaveError(err);
      setProblems(err.details?.length ? problemsFrom(err, sent) : null);
      setNotice({ text: err.details?.length ? `Not saved: ${err.details.length} problem${err.details.length > 1 ? 's' : ''}, shown on the nodes and edges they concern.` : `Not saved: ${err.message}`, bad: true });
    } finally {
      setSaving(false);
    }
  };
  const revert = () => {
    setDraft(saved.base);
    setProblems(null);
    setSaveError(null);
    setSelected(null);
  };
  const autoLayout = () => change({ layout: positions(def, {}) });
  const remove = async () => {
    try {
      await api('DELETE', `/workflows/${id}`);
      navigate('/workflows');
    } catch (err) {
      setSaveError(err);
      setNotice({ text: `Not deleted: ${err.message}`, bad: true });
    }
  };

  // problems as the graph and the inspector show them
  const graphProblems = { nodes: problems?.nodes ?? {}, edges: Object.fromEntries(def.edges.map((e, i) => [i, problems?.edges?.[edgeKey(e)] ?? []])) };
  const node = selected?.kind === 'node' ? def.nodes.find((n) => n.id === selected.id) : null;
  const edge = selected?.kind === 'edge' ? def.edges[selected.index] : null;
  const workflowError = problems ? { details: problems.workflow } : saveError && !saveError.details?.length ? null : saveError;

  return html`<div class="page editor-page" data-workflow=${id}>
    <${PageHead} title=${draft.name || 'Workflow'} sub=${html`${def.nodes.length} nodes · ${def.edges.length} edges ${draft.is_active ? null : html`<${Badge} kind="muted">inactive<//>`} ${dirty ? html`<${Badge} kind="warn">unsaved changes<//>` : null}`}>
      <a class="button quiet" href="#/workflows">All workflows</a>
      <button type="button" class="quiet" onClick=${revert} disabled=${!dirty}>Revert</button>
      <button type="button" id="save-workflow" onClick=${save} disabled=${saving}>${saving ? 'Saving…' : 'Save'}</button>
    <//>
    ${notice ? html`<p id="editor-status" class=${notice.bad ? 'status bad' : 'status'} role="status">${notice.text}</p>` : null}
    ${problems && (problems.general.length || problems.count)
      ? html`<div class="error-box" id="problems" role="alert">
          <strong>${saveError?.error}</strong>
          <ul>
            ${Object.entries(problems.nodes).map(([nid, list]) => list.map((d) => html`<li data-node=${nid}><button type="button" class="link" onClick=${() => setSelected({ kind: 'node', id: nid })}>${nid}</button>: ${d}</li>`))}
            ${Object.entries(problems.edges).map(([k, list]) => list.map((d) => {
              const i = def.edges.findIndex((e) => edgeKey(e) === k);
              return html`<li data-edge=${k}><button type="button" class="link" onClick=${() => i >= 0 && setSelected({ kind: 'edge', index: i })}>${k.replace('>', ' → ')}</button>: ${d}</li>`;
            }))}
            ${[...problems.workflow, ...problems.general].map((d) => html`<li>${d}</li>`)}
          </ul>
        </div>`
      : saveError && !saveError.details?.length
        ? html`<${ErrorBox} error=${saveError} />`
        : null}
    <div class="editor">
      <div class="editor-main">
        <div class="toolbar" role="toolbar" aria-label="Graph tools">
          <label for="new-node-type">New node</label>
          <${Select} id="new-node-type" value=${newType} options=${NODE_TYPES.map((t) => [t, t])} onChange=${setNewType} />
          <button type="button" id="add-node" onClick=${addNode}>Add node</button>
          <button type="button" class="quiet" id="auto-layout" onClick=${autoLayout}>Lay out again</button>
        </div>
        <${Graph}
          definition=${def}
          layout=${draft.layout}
          editable
          tall
          selected=${selected}
          connectFrom=${connectFrom}
          problems=${graphProblems}
          current=${lit.current}
          visited=${lit.visited}
          onSelect=${(sel) => {
            setConnectFrom(null);
            setSelected(sel);
          }}
          onMove=${move}
          onConnect=${addEdge}
          onDelete=${onDelete}
          onCancel=${() => (connectFrom ? setConnectFrom(null) : setSelected(null))}
          label=${`The workflow ${draft.name}: ${def.nodes.length} nodes`}
        />
      </div>
      <aside class="editor-side">
        ${node
          ? html`<${NodeInspector}
              key=${node.id}
              node=${node}
              definition=${def}
              error=${asError(problems?.nodes?.[node.id])}
              onChange=${(patch) => updateNode(node.id, patch)}
              onRename=${(to) => renameNode(node.id, to)}
              onType=${(t) => changeType(node.id, t)}
              onDelete=${deleteNode}
              onEntry=${(nid) => setDef((d) => ({ ...d, entry_node: nid }))}
              onConnect=${(nid) => setConnectFrom(nid)}
              onAddEdge=${addEdge}
            />`
          : edge
            ? html`<${EdgeInspector}
                key=${selected.index}
                edge=${edge}
                index=${selected.index}
                definition=${def}
                error=${asError(problems?.edges?.[edgeKey(edge)])}
                onChange=${(patch) => updateEdge(selected.index, patch)}
                onDelete=${() => deleteEdge(selected.index)}
              />`
            : html`<${WorkflowInspector} draft=${draft} error=${workflowError} onChange=${change} />`}
      </aside>
    </div>
    <${TryPanel}
      assistants=${assistants}
      workflowId=${id}
      onNode=${(current, visited) => setLit({ current, visited })}
      note=${dirty ? 'runs the saved workflow: save your changes first' : 'runs the saved workflow'}
    />
    <section class="panel danger-zone">
      <h2>Delete this workflow</h2>
      <p class="hint">Refused while a number runs it (detach it on the Numbers page first).</p>
      <${ConfirmButton} id="delete-workflow" onConfirm=${remove} confirmLabel="Delete it for good?">Delete workflow<//>
    </section>
  </div>`;
}
