import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { renderChart, ticks } from './chart.js';

describe('benchmark chart', () => {
  it('ticks are round steps from 0 that reach the maximum', () => {
    expect(ticks(10)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(ticks(9.3)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(ticks(250)).toEqual([0, 50, 100, 150, 200, 250]);
    expect(ticks(0)).toEqual([0, 1]);
    fc.assert(
      fc.property(fc.double({ min: 1e-3, max: 1e6, noNaN: true }), (max) => {
        const t = ticks(max);
        expect(t[0]).toBe(0);
        expect(t[t.length - 1]!).toBeGreaterThanOrEqual(max * (1 - 1e-9));
        expect(t.length).toBeLessThanOrEqual(12);
        const step = t[1]! - t[0]!;
        const mantissa = step / 10 ** Math.floor(Math.log10(step));
        expect([1, 2, 5, 10].some((m) => Math.abs(m - mantissa) < 1e-6)).toBe(true);
      }),
    );
  });

  it('draws each series as a path through its points, with the reference line and escaped labels', () => {
    const svg = renderChart({
      title: 'Latency <calls> & more',
      xLabel: 'concurrent calls',
      panels: [
        {
          title: 'ms',
          yLabel: 'ms',
          reference: { y: 10, label: 'target' },
          series: [
            { name: 'service p99', color: '#111', points: [[200, 3], [50, 1], [100, 2]] },
            { name: 'empty', color: '#222', points: [] },
          ],
        },
      ],
    });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg).toContain('Latency &lt;calls&gt; &amp; more');
    expect(svg).not.toContain('<calls>');
    const paths = [...svg.matchAll(/<path d="([^"]+)"/g)].map((m) => m[1]!);
    expect(paths).toHaveLength(1);
    // sorted by x: M at 50, then L at 100 and 200
    expect(paths[0]!.split(' L').length).toBe(3);
    expect(svg.match(/<circle /g)).toHaveLength(3);
    expect(svg).toContain('stroke-dasharray="6 4"'); // the reference line
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
  });
});
