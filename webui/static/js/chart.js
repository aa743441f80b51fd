// A small SVG line chart of our own: one or more series over time, each with its min-max range
// shaded, time and value axes. No library: about 100 lines do what the screens need.

import { h } from "./dom.js";

export const COLOURS = ["#1d6fb8", "#b8461d", "#2e7d32", "#7b1fa2", "#a07800"];

/**
 * @typedef {{label: string, unit: string, points: {t: number, v: number, min: number, max: number}[]}} Series
 * @param {Series[]} series
 * @param {{width?: number, height?: number, start: number, end: number, title: string}} opts
 */
export function lineChart(series, opts) {
  const width = opts.width || 900;
  const height = opts.height || 320;
  const pad = { l: 52, r: 14, t: 12, b: 28 };
  const values = series.flatMap((s) => s.points.flatMap((p) => [p.min, p.max, p.v]));
  let lo = values.length ? Math.min(...values) : 0;
  let hi = values.length ? Math.max(...values) : 1;
  if (hi - lo < 1e-9) {
    lo -= 1;
    hi += 1;
  }
  const span = hi - lo;
  lo -= span * 0.05;
  hi += span * 0.05;
  const x = (/** @type {number} */ t) => pad.l + ((t - opts.start) / (opts.end - opts.start || 1)) * (width - pad.l - pad.r);
  const y = (/** @type {number} */ v) => pad.t + (1 - (v - lo) / (hi - lo)) * (height - pad.t - pad.b);
  // Enough decimals that the five labels differ: a pH line spanning 0.02 needs three.
  const digits = Math.max(0, Math.min(4, Math.ceil(-Math.log10((hi - lo) / 4)) + 1));
  const grid = [];
  for (let i = 0; i <= 4; i++) {
    const v = lo + ((hi - lo) * i) / 4;
    grid.push(h("svg:line", { class: "grid", x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v) }));
    grid.push(h("svg:text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(digits)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = opts.start + ((opts.end - opts.start) * i) / 4;
    grid.push(h("svg:text", { x: x(t), y: height - 8, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, formatTime(t, opts.end - opts.start)));
  }
  const paths = series.map((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    if (!s.points.length) return null;
    const line = s.points.map((p, j) => `${j ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join("");
    const upper = s.points.map((p, j) => `${j ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.max).toFixed(1)}`).join("");
    const lower = [...s.points].reverse().map((p) => `L${x(p.t).toFixed(1)},${y(p.min).toFixed(1)}`).join("");
    return [
      h("svg:path", { class: "range", d: `${upper}${lower}Z`, fill: colour }),
      h("svg:path", { class: "line", d: line, stroke: colour }),
    ];
  });
  return h(
    "svg:svg",
    { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": opts.title },
    h("svg:title", null, opts.title),
    grid,
    paths,
  );
}

/** @param {number} t @param {number} range */
function formatTime(t, range) {
  const d = new Date(t);
  if (range <= 36 * 3600_000) return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return d.toLocaleDateString([], { month: "short", day: "numeric" });
}
