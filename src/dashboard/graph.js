// A workflow drawn with Cytoscape: one box per node (coloured by type; the entry node says so, a
// global node has a dashed border), one arrow per edge with its description. Positions come from
// the workflow's `layout`; nodes it does not place are laid out by dagre (top to bottom, a rank
// per step). Under the canvas, the same graph as lists of buttons: what a keyboard or a screen
// reader uses, and what the tests read. Read-only on a call's page (the path taken, the current
// node); editable in the workflow editor (select, drag, connect, arrow keys, Delete).
import { useEffect, useRef } from 'preact/hooks';
import cytoscape from 'cytoscape';
import dagre from '@dagrejs/dagre';
import { html } from './html.js';

const TYPE_COLOURS = {
  conversation: ['#3867d6', '#edf2fd'],
  tool: ['#c27c0e', '#fdf5e6'],
  transfer: ['#7d4fc7', '#f3edfc'],
  end: ['#5c6270', '#eff0f2'],
};
const CURRENT = ['#0f8a4a', '#d8f5e4'];
const PROBLEM = '#c92a2a';

const nodeLabel = (n, entry) => `${n.id}\n${[n.type, n.id === entry ? 'entry' : '', n.global ? 'global' : ''].filter(Boolean).join(' · ')}`;
const nodeWidth = (n, entry) => Math.max(120, ...nodeLabel(n, entry).split('\n').map((l, i) => l.length * (i ? 6.6 : 8.4) + 28));
const short = (text, max = 38) => (!text ? '' : text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** Where each node goes: the layout's position, else dagre's (its centre, like Cytoscape's). */
export function positions(definition, layout = {}) {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: 'TB', nodesep: 36, ranksep: 70, edgesep: 16, marginx: 20, marginy: 20 });
  g.setDefaultEdgeLabel(() => ({}));
  const entry = definition.entry_node;
  for (const n of definition.nodes) g.setNode(n.id, { width: nodeWidth(n, entry), height: 48 });
  definition.edges.forEach((e, i) => {
    if (g.hasNode(e.from) && g.hasNode(e.to) && e.from !== e.to) g.setEdge(e.from, e.to, { width: e.description ? 120 : 0, height: e.description ? 24 : 0 }, `e${i}`);
  });
  dagre.layout(g);
  const out = {};
  for (const n of definition.nodes) {
    const placed = layout[n.id];
    const d = g.node(n.id);
    out[n.id] = placed && Number.isFinite(placed.x) && Number.isFinite(placed.y) ? { x: placed.x, y: placed.y } : { x: d?.x ?? 0, y: d?.y ?? 0 };
  }
  return out;
}

const STYLE = [
  {
    selector: 'node',
    style: {
      shape: 'round-rectangle',
      width: 'data(w)',
      height: 48,
      label: 'data(label)',
      'text-wrap': 'wrap',
      'text-valign': 'center',
      'text-halign': 'center',
      'font-size': 12,
      'font-family': 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif',
      color: '#1d2430',
      'border-width': 1.5,
      'background-color': 'data(bg)',
      'border-color': 'data(fg)',
    },
  },
  { selector: 'node.global', style: { 'border-style': 'dashed' } },
  { selector: 'node.entry', style: { 'font-weight': 'bold' } },
  { selector: 'node.visited', style: { 'border-width': 3 } },
  { selector: 'node.current', style: { 'background-color': CURRENT[1], 'border-color': CURRENT[0], 'border-width': 4, color: CURRENT[0] } },
  { selector: 'node.problem', style: { 'border-color': PROBLEM, 'border-width': 3.5, color: PROBLEM } },
  { selector: 'node.connect-source', style: { 'border-style': 'double', 'border-width': 5 } },
  {
    selector: 'edge',
    style: {
      width: 1.5,
      'curve-style': 'bezier',
      'line-color': '#9aa3b2',
      'target-arrow-color': '#9aa3b2',
      'target-arrow-shape': 'triangle',
      'arrow-scale': 1.1,
      label: 'data(label)',
      'font-size': 10,
      color: '#667085',
      'text-wrap': 'wrap',
      'text-max-width': 150,
      'text-background-color': '#ffffff',
      'text-background-opacity': 0.9,
      'text-background-padding': 2,
    },
  },
  { selector: 'edge.taken', style: { width: 3, 'line-color': CURRENT[0], 'target-arrow-color': CURRENT[0] } },
  { selector: 'edge.problem', style: { 'line-color': PROBLEM, 'target-arrow-color': PROBLEM, 'line-style': 'dashed', color: PROBLEM } },
  { selector: '.selected', style: { 'underlay-color': '#3867d6', 'underlay-opacity': 0.22, 'underlay-padding': 7 } },
];

function elementsOf(definition, pos) {
  const entry = definition.entry_node;
  const ids = new Set(definition.nodes.map((n) => n.id));
  const nodes = definition.nodes.map((n) => {
    const [fg, bg] = TYPE_COLOURS[n.type] ?? TYPE_COLOURS.end;
    return { group: 'nodes', data: { id: n.id, label: nodeLabel(n, entry), w: nodeWidth(n, entry), fg, bg }, position: { ...pos[n.id] } };
  });
  const edges = definition.edges
    .map((e, i) => ({ e, i }))
    .filter(({ e }) => ids.has(e.from) && ids.has(e.to))
    .map(({ e, i }) => ({ group: 'edges', data: { id: `edge-${i}`, index: i, source: e.from, target: e.to, label: short(e.description) } }));
  return { nodes, edges };
}

/** The edges a path of visited nodes took (consecutive pairs). */
export const takenEdges = (visited = []) => new Set(visited.slice(1).map((to, i) => `${visited[i]}>${to}`));

/**
 * The graph. `problems`: {nodes: {id: [text]}, edges: {index: [text]}}; `selected`: {kind: 'node', id}
 * or {kind: 'edge', index}. With `editable`: onSelect, onMove(id, {x, y}), onConnect(from, to),
 * onDelete(selection), `connectFrom` (the node an edge is being drawn from).
 */
export function Graph({
  definition,
  layout,
  current = null,
  visited = [],
  problems = { nodes: {}, edges: {} },
  selected = null,
  editable = false,
  connectFrom = null,
  onSelect,
  onMove,
  onConnect,
  onDelete,
  onCancel,
  label = 'Workflow graph',
  tall = false,
}) {
  const box = useRef(null);
  const cyRef = useRef(null);
  // positions asked for by the arrow keys and not yet back through the layout: the layout of a
  // render in between is older, and must not move the node back
  const moving = useRef({});
  const props = useRef({});
  props.current = { onSelect, onMove, onConnect, onDelete, onCancel, connectFrom, selected, editable };

  // made once; events read the latest props
  useEffect(() => {
    const cy = cytoscape({
      container: box.current,
      style: STYLE,
      elements: [],
      layout: { name: 'preset' },
      minZoom: 0.2,
      maxZoom: 2.5,
      boxSelectionEnabled: false,
      autounselectify: true,
      autoungrabify: !editable,
    });
    cyRef.current = cy;
    window.dashboard.graph = cy;
    cy.on('tap', 'node', (e) => {
      const p = props.current;
      const id = e.target.id();
      if (p.editable && p.connectFrom && p.connectFrom !== id) p.onConnect?.(p.connectFrom, id);
      else p.onSelect?.({ kind: 'node', id });
    });
    cy.on('tap', 'edge', (e) => props.current.onSelect?.({ kind: 'edge', index: e.target.data('index') }));
    cy.on('tap', (e) => {
      if (e.target === cy) props.current.onSelect?.(null);
    });
    cy.on('dragfree', 'node', (e) => {
      const { x, y } = e.target.position();
      props.current.onMove?.(e.target.id(), { x: Math.round(x), y: Math.round(y) });
    });
    return () => {
      if (window.dashboard.graph === cy) window.dashboard.graph = null;
      cy.destroy();
    };
  }, []);

  // a canvas that changes width (a phone turned, a window resized) keeps the graph in view: a
  // drawing is fitted again, an editor only when no node is left in sight
  useEffect(() => {
    const cy = cyRef.current;
    const el = box.current;
    if (!cy || !el || typeof ResizeObserver === 'undefined') return undefined;
    let width = el.clientWidth;
    const observer = new ResizeObserver(() => {
      if (el.clientWidth === width || el.clientWidth === 0) return;
      width = el.clientWidth;
      cy.resize();
      if (cy.nodes().empty()) return;
      const ext = cy.extent();
      const inSight = cy.nodes().some((n) => {
        const { x, y } = n.position();
        return x >= ext.x1 && x <= ext.x2 && y >= ext.y1 && y <= ext.y2;
      });
      if (!props.current.editable || !inSight) cy.fit(undefined, 24);
    });
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  // the elements follow the definition and the layout; the view is fitted when the nodes change
  const nodeKey = definition ? definition.nodes.map((n) => n.id).join('\n') : '';
  useEffect(() => {
    const cy = cyRef.current;
    if (!cy || !definition) return;
    const pos = positions(definition, layout ?? {});
    const { nodes, edges } = elementsOf(definition, pos);
    const before = new Set(cy.nodes().map((n) => n.id()));
    cy.batch(() => {
      const keep = new Set(nodes.map((n) => n.data.id));
      cy.nodes().filter((n) => !keep.has(n.id())).remove();
      cy.edges().remove();
      for (const n of nodes) {
        const el = cy.getElementById(n.data.id);
        if (el.nonempty()) {
          el.data(n.data);
          const wanted = moving.current[n.data.id];
          if (wanted && (wanted.x !== n.position.x || wanted.y !== n.position.y)) continue;
          delete moving.current[n.data.id];
          if (!el.grabbed()) el.position(n.position);
        } else cy.add(n);
      }
      cy.add(edges);
    });
    const added = nodes.some((n) => !before.has(n.data.id));
    if (before.size === 0 || (added && !editable)) cy.fit(undefined, 24);
    else if (added) {
      // a node added off screen is brought into view
      const ext = cy.extent();
      const outside = nodes.some((n) => !before.has(n.data.id) && (n.position.x < ext.x1 || n.position.x > ext.x2 || n.position.y < ext.y1 || n.position.y > ext.y2));
      if (outside) cy.fit(undefined, 24);
    }
  }, [definition, layout, nodeKey]);

  // what is lit: the path taken, the current node, problems, the selection
  const taken = takenEdges(visited);
  useEffect(() => {
    const cy = cyRef.current;
    if (!cy || !definition) return;
    cy.batch(() => {
      cy.nodes().forEach((n) => {
        const id = n.id();
        const node = definition.nodes.find((x) => x.id === id);
        n.toggleClass('entry', id === definition.entry_node);
        n.toggleClass('global', !!node?.global);
        n.toggleClass('current', id === current);
        n.toggleClass('visited', visited.includes(id));
        n.toggleClass('problem', !!problems.nodes?.[id]?.length);
        n.toggleClass('connect-source', id === connectFrom);
        n.toggleClass('selected', selected?.kind === 'node' && selected.id === id);
      });
      cy.edges().forEach((e) => {
        const i = e.data('index');
        e.toggleClass('taken', taken.has(`${e.data('source')}>${e.data('target')}`));
        e.toggleClass('problem', !!problems.edges?.[i]?.length);
        e.toggleClass('selected', selected?.kind === 'edge' && selected.index === i);
      });
    });
  });

  const onKey = (e) => {
    const p = props.current;
    if (e.key === 'Escape') return p.onCancel?.();
    if (!p.editable || !p.selected) return undefined;
    if (e.key === 'Delete' || e.key === 'Backspace') {
      e.preventDefault();
      return p.onDelete?.(p.selected);
    }
    const step = e.shiftKey ? 50 : 10;
    const d = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] }[e.key];
    if (!d || p.selected.kind !== 'node') return undefined;
    e.preventDefault();
    const node = cyRef.current.getElementById(p.selected.id);
    if (node.empty()) return undefined;
    const { x, y } = moving.current[p.selected.id] ?? node.position();
    const to = { x: Math.round(x + d[0]), y: Math.round(y + d[1]) };
    moving.current[p.selected.id] = to;
    node.position(to);
    return p.onMove?.(p.selected.id, to);
  };

  const fit = () => cyRef.current?.fit(undefined, 24);
  const problemCount = (list) => (list?.length ? html`<span class="problem-count">${list.length} problem${list.length > 1 ? 's' : ''}</span>` : null);

  return html`<div class=${`graph${tall ? ' tall' : ''}`}>
    <div class="graph-tools">
      <button type="button" class="quiet small" onClick=${fit}>Fit</button>
      ${editable ? html`<span class="hint">Drag to move · arrow keys move the selected node · Delete removes it</span>` : null}
      ${connectFrom ? html`<span class="connecting" role="status">Choose the node to connect <b>${connectFrom}</b> to (Esc cancels)</span>` : null}
    </div>
    <div class="graph-canvas" ref=${box} tabindex="0" role="img" aria-label=${label} onKeyDown=${onKey}></div>
    ${definition
      ? html`<details class="graph-lists" open=${editable}>
          <summary>Nodes and edges as a list</summary>
          <div class="lists">
            <ul class="graph-nodes" aria-label="Nodes">
              ${definition.nodes.map(
                (n) => html`<li
                  key=${n.id}
                  data-node=${n.id}
                  class=${['node', `k-${n.type}`, n.global ? 'global' : '', n.id === definition.entry_node ? 'entry' : '', n.id === current ? 'current' : '', visited.includes(n.id) ? 'visited' : '', problems.nodes?.[n.id]?.length ? 'problem' : '', selected?.kind === 'node' && selected.id === n.id ? 'selected' : ''].filter(Boolean).join(' ')}
                >
                  <button type="button" class="link" onClick=${() => (connectFrom && connectFrom !== n.id ? onConnect?.(connectFrom, n.id) : onSelect?.({ kind: 'node', id: n.id }))}>${n.id}</button>
                  <span class="meta">${[n.type, n.id === definition.entry_node ? 'entry' : '', n.global ? 'global' : '', n.id === current ? 'current' : ''].filter(Boolean).join(' · ')}</span>
                  ${problemCount(problems.nodes?.[n.id])}
                </li>`,
              )}
            </ul>
            <ul class="graph-edges" aria-label="Edges">
              ${definition.edges.map(
                (e, i) => html`<li
                  key=${i}
                  data-from=${e.from}
                  data-to=${e.to}
                  data-index=${i}
                  class=${['edge', taken.has(`${e.from}>${e.to}`) ? 'taken' : '', problems.edges?.[i]?.length ? 'problem' : '', selected?.kind === 'edge' && selected.index === i ? 'selected' : ''].filter(Boolean).join(' ')}
                >
                  <button type="button" class="link" onClick=${() => onSelect?.({ kind: 'edge', index: i })}>${e.from} → ${e.to}</button>
                  <span class="meta">${short(e.description, 60)}</span>
                  ${problemCount(problems.edges?.[i])}
                </li>`,
              )}
            </ul>
          </div>
        </details>`
      : null}
  </div>`;
}
