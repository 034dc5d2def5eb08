/**
 * A small SVG line chart for benchmark results (no dependency): one or two panels side by side,
 * each with its own y axis, series drawn as lines with point markers, and optional horizontal
 * reference lines (a target).
 */

export interface Series {
  name: string;
  color: string;
  points: Array<[number, number]>;
  dashed?: boolean;
}

export interface Panel {
  title: string;
  yLabel: string;
  series: Series[];
  reference?: { y: number; label: string };
}

export interface Chart {
  title: string;
  subtitle?: string;
  xLabel: string;
  panels: Panel[];
}

const W = 460;
const H = 330;
const M = { top: 72, right: 20, bottom: 104, left: 58 };

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1).replace(/\.0$/, '') : String(Number(v.toPrecision(2))));

/** Round tick steps: 1, 2 or 5 times a power of ten, about `count` of them up to `max`. */
export function ticks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
  const out: number[] = [];
  for (let v = 0; v <= max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  if (out[out.length - 1]! < max) out.push(Number((out[out.length - 1]! + step).toPrecision(12)));
  return out;
}

function panel(p: Panel, xs: number[], xLabel: string, offsetX: number): string {
  const iw = W - M.left - M.right;
  const ih = H - M.top - M.bottom;
  const xMax = Math.max(...xs, 1);
  const xt = ticks(xMax, 5);
  const xTop = xt[xt.length - 1]!;
  const ys = p.series.flatMap((s) => s.points.map(([, y]) => y)).filter(Number.isFinite);
  const yt = ticks(Math.max(...ys, p.reference?.y ?? 0, 0) * 1.05, 5);
  const yTop = yt[yt.length - 1]!;
  const X = (x: number) => offsetX + M.left + (x / xTop) * iw;
  const Y = (y: number) => M.top + ih - (Math.min(y, yTop) / yTop) * ih;
  const parts: string[] = [];
  parts.push(`<text x="${offsetX + M.left}" y="${M.top - 12}" font-size="13" font-weight="bold">${esc(p.title)}</text>`);
  for (const t of yt) {
    parts.push(`<line x1="${X(0)}" x2="${X(xTop)}" y1="${Y(t)}" y2="${Y(t)}" stroke="#e3e3e3"/>`);
    parts.push(`<text x="${X(0) - 6}" y="${Y(t) + 4}" font-size="11" text-anchor="end">${fmt(t)}</text>`);
  }
  for (const t of xt) {
    parts.push(`<line x1="${X(t)}" x2="${X(t)}" y1="${Y(0)}" y2="${Y(0) + 4}" stroke="#555"/>`);
    parts.push(`<text x="${X(t)}" y="${Y(0) + 17}" font-size="11" text-anchor="middle">${fmt(t)}</text>`);
  }
  parts.push(`<line x1="${X(0)}" x2="${X(xTop)}" y1="${Y(0)}" y2="${Y(0)}" stroke="#555"/>`);
  parts.push(`<line x1="${X(0)}" x2="${X(0)}" y1="${Y(0)}" y2="${Y(yTop)}" stroke="#555"/>`);
  parts.push(`<text x="${X(xTop / 2)}" y="${Y(0) + 34}" font-size="12" text-anchor="middle">${esc(xLabel)}</text>`);
  parts.push(
    `<text transform="translate(${offsetX + 16} ${M.top + ih / 2}) rotate(-90)" font-size="12" text-anchor="middle">${esc(p.yLabel)}</text>`,
  );
  if (p.reference) {
    parts.push(`<line x1="${X(0)}" x2="${X(xTop)}" y1="${Y(p.reference.y)}" y2="${Y(p.reference.y)}" stroke="#c0392b" stroke-dasharray="6 4"/>`);
    parts.push(`<text x="${X(xTop) - 4}" y="${Y(p.reference.y) - 5}" font-size="11" fill="#c0392b" text-anchor="end">${esc(p.reference.label)}</text>`);
  }
  for (const s of p.series) {
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)).sort((a, b) => a[0] - b[0]);
    if (pts.length === 0) continue;
    const d = pts.map(([x, y], i) => `${i ? 'L' : 'M'}${X(x).toFixed(1)} ${Y(y).toFixed(1)}`).join(' ');
    parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`);
    for (const [x, y] of pts) parts.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="3" fill="${s.color}"><title>${esc(`${s.name}: ${fmt(x)} → ${fmt(y)}`)}</title></circle>`);
  }
  // legend under the axis
  p.series.forEach((s, i) => {
    const lx = offsetX + M.left + (i % 2) * (iw / 2);
    const ly = H - 48 + Math.floor(i / 2) * 16;
    parts.push(`<line x1="${lx}" x2="${lx + 18}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`);
    parts.push(`<text x="${lx + 23}" y="${ly}" font-size="11">${esc(s.name)}</text>`);
  });
  return parts.join('\n');
}

export function renderChart(c: Chart): string {
  const xs = c.panels.flatMap((p) => p.series.flatMap((s) => s.points.map(([x]) => x)));
  const width = W * c.panels.length;
  const body = c.panels.map((p, i) => panel(p, xs, c.xLabel, i * W)).join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${H + 8}" viewBox="0 0 ${width} ${H + 8}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="12" y="20" font-size="15" font-weight="bold">${esc(c.title)}</text>`,
    c.subtitle ? `<text x="12" y="37" font-size="11" fill="#555">${esc(c.subtitle)}</text>` : '',
    body,
    '</svg>',
    '',
  ].join('\n');
}
