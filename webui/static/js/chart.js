// A small SVG line chart of our own: series over time, one value axis per unit (left, then
// right), each series with its min-max range shaded, bands (the climate band, alert
// thresholds) behind them, and the values at a moment under the pointer or a finger.

import { h, mount } from "./dom.js";

export const COLOURS = ["#1d6fb8", "#b8461d", "#2e7d32", "#7b1fa2", "#a07800"];

/**
 * @typedef {{label: string, unit: string, format: (v: number) => string, points: {t: number, v: number, min: number, max: number}[]}} Series
 * @typedef {{unit: string, lo: number|null, hi: number|null, kind: "ok"|"alert", label: string}} Band
 *   ok: the range to stay in (shaded); alert: beyond lo or hi is an alert (shaded outside).
 * @param {Series[]} series
 * @param {{width?: number, height?: number, start: number, end: number, title: string, bands?: Band[], pointer?: {at: number|null}}} opts
 *   pointer: where the values were last read (chart units), kept by the caller across redraws
 *   (a live reading redraws the chart under a finger that has not moved).
 */
export function lineChart(series, opts) {
  const width = opts.width || 900;
  const height = opts.height || 320;
  const units = [...new Set(series.map((s) => s.unit))];
  const pad = { l: 58, r: units.length > 1 ? 58 * (units.length - 1) : 14, t: 26, b: 28 };
  const bottom = height - pad.b;
  const right = width - pad.r;
  const x = (/** @type {number} */ t) => pad.l + ((t - opts.start) / (opts.end - opts.start || 1)) * (right - pad.l);
  const bands = opts.bands || [];
  // With two units, each axis takes the colour of its (first) series, so which is which shows.
  const colourOf = (/** @type {string} */ unit) => (units.length > 1 ? COLOURS[series.findIndex((s) => s.unit === unit) % COLOURS.length] : "#4d5a52");
  const axes = units.map((unit) => axis(unit, series.filter((s) => s.unit === unit), bands.filter((b) => b.unit === unit), pad.t, bottom, colourOf(unit)));
  const axisOf = (/** @type {string} */ unit) => /** @type {Axis} */ (axes.find((a) => a.unit === unit));

  const parts = [];
  for (const band of bands) {
    const a = axes.find((each) => each.unit === band.unit);
    if (!a) continue;
    const rect = (/** @type {number} */ from, /** @type {number} */ to) => {
      const [y1, y2] = [a.y(Math.min(Math.max(from, a.lo), a.hi)), a.y(Math.min(Math.max(to, a.lo), a.hi))];
      // With two units, a climate band takes its series' colour: which band is whose shows.
      const shade = h("svg:rect", { class: `band ${band.kind}`, x: pad.l, width: right - pad.l, y: Math.min(y1, y2), height: Math.abs(y2 - y1) }, h("svg:title", null, band.label));
      if (band.kind === "ok" && units.length > 1) shade.style.setProperty("fill", colourOf(band.unit));
      return shade;
    };
    if (band.kind === "ok" && band.lo !== null && band.hi !== null) parts.push(rect(band.lo, band.hi));
    if (band.kind === "alert" && band.hi !== null) parts.push(rect(band.hi, a.hi));
    if (band.kind === "alert" && band.lo !== null) parts.push(rect(a.lo, band.lo));
  }
  axes.forEach((a, i) => {
    const side = i === 0 ? pad.l - 6 : right + 6 + 58 * (i - 1);
    for (const v of a.ticks) {
      if (i === 0) parts.push(h("svg:line", { class: "grid", x1: pad.l, x2: right, y1: a.y(v), y2: a.y(v) }));
      parts.push(h("svg:text", { x: side, y: a.y(v) + 4, "text-anchor": i === 0 ? "end" : "start", fill: a.colour }, v.toFixed(a.digits)));
    }
    parts.push(h("svg:text", { class: "unit", x: i === 0 ? 4 : width - 4, y: 14, "text-anchor": i === 0 ? "start" : "end", fill: a.colour }, a.unit));
  });
  const steps = width < 600 ? 2 : 4; // time labels that fit side by side
  for (let i = 0; i <= steps; i++) {
    const t = opts.start + ((opts.end - opts.start) * i) / steps;
    parts.push(h("svg:text", { x: x(t), y: height - 8, "text-anchor": i === 0 ? "start" : i === steps ? "end" : "middle" }, formatTime(t, opts.end - opts.start)));
  }
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const y = axisOf(s.unit).y;
    const at = (/** @type {number} */ t, /** @type {number} */ v) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`;
    if (s.points.length > 1) {
      const upper = s.points.map((p, j) => `${j ? "L" : "M"}${at(p.t, p.max)}`).join("");
      const lower = [...s.points].reverse().map((p) => `L${at(p.t, p.min)}`).join("");
      parts.push(h("svg:path", { class: "range", d: `${upper}${lower}Z`, fill: colour }));
      parts.push(h("svg:path", { class: "line", d: s.points.map((p, j) => `${j ? "L" : "M"}${at(p.t, p.v)}`).join(""), stroke: colour }));
    } else {
      // A single point (a year's view of a sensor added an hour ago) is a dot, not nothing.
      parts.push(s.points.map((p) => h("svg:circle", { class: "dot", cx: x(p.t), cy: y(p.v), r: 5, fill: colour })));
    }
  });
  const svg = h(
    "svg:svg",
    { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": opts.title },
    h("svg:title", null, opts.title),
    parts,
  );
  readout(svg, series, x, axisOf, { left: pad.l, right, top: pad.t, bottom, width }, opts.pointer || { at: null });
  return svg;
}

/** @typedef {{unit: string, lo: number, hi: number, y: (v: number) => number, ticks: number[], digits: number, colour: string}} Axis */

/** A value axis for the series of one unit, taking in its bands. @returns {Axis} */
function axis(/** @type {string} */ unit, /** @type {Series[]} */ series, /** @type {Band[]} */ bands, /** @type {number} */ top, /** @type {number} */ bottom, /** @type {string} */ colour) {
  const values = series.flatMap((s) => s.points.flatMap((p) => [p.min, p.max, p.v]));
  for (const b of bands) for (const v of [b.lo, b.hi]) if (v !== null && values.length) values.push(v);
  let lo = values.length ? Math.min(...values) : 0;
  let hi = values.length ? Math.max(...values) : 1;
  if (hi - lo < 1e-9) {
    lo -= Math.max(1, Math.abs(lo) * 0.05);
    hi += Math.max(1, Math.abs(hi) * 0.05);
  }
  const span = hi - lo;
  lo -= span * 0.05;
  hi += span * 0.05;
  // Enough decimals that the five labels differ: a pH line spanning 0.02 needs three.
  const digits = Math.max(0, Math.min(4, Math.ceil(-Math.log10((hi - lo) / 4)) + 1));
  const ticks = [0, 1, 2, 3, 4].map((i) => lo + ((hi - lo) * i) / 4);
  const y = (/** @type {number} */ v) => top + (1 - (v - lo) / (hi - lo)) * (bottom - top);
  return { unit, lo, hi, y, ticks, digits, colour };
}

/**
 * The values at the moment under the pointer (a mouse, a finger, a pen): a line across the
 * chart and each series' nearest value with its unit, until the pointer leaves.
 */
function readout(/** @type {Element} */ svg, /** @type {Series[]} */ series, /** @type {(t: number) => number} */ x, /** @type {(unit: string) => Axis} */ axisOf, /** @type {{left: number, right: number, top: number, bottom: number, width: number}} */ box, /** @type {{at: number|null}} */ pointer) {
  const all = series.filter((s) => s.points.length);
  if (!all.length) return;
  const cursor = h("svg:line", { class: "cursor", y1: box.top, y2: box.bottom, visibility: "hidden" });
  const label = h("svg:g", { class: "readout", visibility: "hidden" });
  svg.append(cursor, label);
  const showAt = (/** @type {number} */ px) => {
    if (px < box.left || px > box.right) return hide();
    pointer.at = px;
    const nearest = all.map((s) => s.points.reduce((best, p) => (Math.abs(x(p.t) - px) < Math.abs(x(best.t) - px) ? p : best)));
    const t = nearest[0].t;
    const lines = [formatStamp(t), ...all.map((s, i) => `${s.label}: ${s.format(nearest[i].v)}`)];
    const cx = x(t);
    cursor.setAttribute("x1", String(cx));
    cursor.setAttribute("x2", String(cx));
    const wide = 14 + 7.2 * Math.max(...lines.map((l) => l.length));
    const left = cx + 10 + wide > box.right ? cx - 10 - wide : cx + 10;
    mount(
      label,
      h("svg:rect", { x: left, y: box.top + 4, width: wide, height: 10 + 18 * lines.length, rx: 6 }),
      lines.map((line, i) => h("svg:text", { x: left + 7, y: box.top + 22 + 18 * i, class: i ? `c${(i - 1) % COLOURS.length}` : "when" }, line)),
      all.map((s, i) => h("svg:circle", { cx, cy: axisOf(s.unit).y(nearest[i].v), r: 4, fill: COLOURS[i % COLOURS.length] })),
    );
    cursor.setAttribute("visibility", "visible");
    label.setAttribute("visibility", "visible");
  };
  const show = (/** @type {PointerEvent} */ e) => {
    const bounds = svg.getBoundingClientRect();
    showAt(((e.clientX - bounds.left) / bounds.width) * box.width);
  };
  const hide = () => {
    pointer.at = null;
    cursor.setAttribute("visibility", "hidden");
    label.setAttribute("visibility", "hidden");
  };
  svg.addEventListener("pointermove", /** @type {EventListener} */ (show));
  svg.addEventListener("pointerdown", /** @type {EventListener} */ (show));
  svg.addEventListener("pointerleave", hide);
  if (pointer.at !== null) showAt(pointer.at);
}

/** @param {number} t @param {number} range */
function formatTime(t, range) {
  const d = new Date(t);
  if (range <= 36 * 3600_000) return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return d.toLocaleDateString([], { month: "short", day: "numeric" });
}

/** @param {number} t */
function formatStamp(t) {
  return new Date(t).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}
