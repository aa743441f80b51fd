// Sensor detail: a chart of its metrics over a chosen range (the API picks the resolution),
// the live tail from /ws/sensor-data, min/avg/max, and its calibration state and history.

import { all, get } from "../api.js";
import { optional, sensorsOf } from "../farmdata.js";
import { COLOURS, lineChart } from "../chart.js";
import { h, mount, when } from "../dom.js";
import { formatValue, metricLabel, metricTitle } from "../metrics.js";
import { showError } from "../notify.js";
import { LiveStream } from "../streams.js";

const RANGES = [
  { key: "1h", label: "1 hour", ms: 3600_000 },
  { key: "6h", label: "6 hours", ms: 6 * 3600_000 },
  { key: "24h", label: "1 day", ms: 86400_000 },
  { key: "7d", label: "1 week", ms: 7 * 86400_000 },
  { key: "30d", label: "1 month", ms: 30 * 86400_000 },
  { key: "1y", label: "1 year", ms: 365 * 86400_000 },
];

/** @param {any} ctx */
export async function render(ctx) {
  const id = ctx.params.id;
  const device =
    (await optional(get(`/api/v1/devices/${id}`), null)) ||
    (await all("/api/v1/devices", "devices", { farm_id: ctx.farm?.id })).find((d) => d.id === id);
  if (!device) throw new Error("No such sensor on this farm.");
  if (ctx.farm && device.farm_id !== ctx.farm.id) ctx.selectFarm(device.farm_id);
  const sensors = (await optional(all("/api/v1/sensors", "sensors", { farm_id: device.farm_id }), null)) || sensorsOf([device]);
  const sensor = sensors.find((s) => s.id === id) || sensorsOf([device])[0];
  const history = await optional(get(`/api/v1/sensors/${id}/calibrations`, { limit: 20 }), { calibrations: [] });
  // What the chart shades: the farm's climate band and this sensor's alert thresholds (each
  // only a decoration: a caller who may not read them sees the chart without).
  const [climate, rules] = await Promise.all([
    get("/api/v1/climate-control", { farm_id: device.farm_id }).then((r) => r.climate_controls.find((/** @type {any} */ c) => !c.row_id)?.settings || null, () => null),
    get("/api/v1/alert-rules", { device_id: id, limit: 100 }).then((r) => r.alert_rules.filter((/** @type {any} */ a) => a.enabled), () => []),
  ]);
  let range = RANGES[0];
  /** @type {Set<string>} */
  const shown = new Set(sensor.metrics.slice(0, 2).map((/** @type {any} */ m) => m.name));
  const showAll = !sensor.metrics.length; // the cloud's registry view names no metrics: show every series
  /** @type {any} */
  let data = null;
  const chartBox = h("div", { class: "chart-box" });
  const pointer = { at: null }; // where values are being read, across live redraws
  const stats = h("div", { class: "summary" });
  const rangeButtons = h("div", { class: "segmented", role: "group", "aria-label": "Time range" });
  const metricBoxes = h("div", { class: "segmented", role: "group", "aria-label": "Metrics" });

  const draw = () => {
    if (!data) return;
    const visible = data.series.filter((/** @type {any} */ s) => showAll || shown.has(s.metric));
    const series = visible.map((/** @type {any} */ s) => ({
      label: metricLabel(s.metric),
      unit: s.unit,
      format: (/** @type {number} */ v) => formatValue(s.metric, v, s.unit),
      points: s.points.map((/** @type {any} */ p) => ({ t: Date.parse(p.timestamp), v: p.value, min: p.min, max: p.max })),
    }));
    const bands = bandsOf(visible, climate, rules);
    const start = Date.parse(data.start);
    const end = Math.max(Date.parse(data.end), ...series.flatMap((s) => s.points.map((p) => p.t)));
    mount(
      chartBox,
      h(
        "p",
        { class: "legend" },
        visible.map((/** @type {any} */ s, /** @type {number} */ i) => h("span", { class: `c${i}` }, metricTitle(s.metric, s.unit))),
        bands.some((b) => b.kind === "ok") ? h("span", { class: "band-key" }, "climate band") : null,
        bands.some((b) => b.kind === "alert") ? h("span", { class: "alert-key" }, "alert threshold") : null,
        h("small", null, ` · resolution ${data.resolution} · touch or point at the chart for values`),
      ),
      lineChart(series, { start, end, bands, pointer, ...chartSize(ctx.main), title: `${sensor.name}: ${series.map((s) => s.label).join(", ")} over the last ${range.label}` }),
    );
    chartBox.querySelectorAll(".legend span[class^='c']").forEach((el, i) => /** @type {HTMLElement} */ (el).style.setProperty("--c", COLOURS[i % COLOURS.length]));
    mount(
      stats,
      visible.map((/** @type {any} */ s) => {
        const pts = s.points;
        const show = (/** @type {number|null} */ v) => formatValue(s.metric, v, s.unit);
        const count = pts.reduce((n, /** @type {any} */ p) => n + p.count, 0);
        const mean = count ? pts.reduce((n, /** @type {any} */ p) => n + p.value * p.count, 0) / count : null;
        const last = pts[pts.length - 1];
        return h(
          "div",
          { class: "stat", "data-metric": s.metric },
          h("span", null, metricTitle(s.metric, s.unit)),
          h("strong", { class: "latest" }, last ? show(last.value) : "–"),
          h("span", null, pts.length ? `min ${show(Math.min(...pts.map((/** @type {any} */ p) => p.min)))} · avg ${show(mean)} · max ${show(Math.max(...pts.map((/** @type {any} */ p) => p.max)))}` : "no data"),
        );
      }),
    );
  };

  const load = async () => {
    const end = new Date();
    const start = new Date(end.getTime() - range.ms);
    try {
      data = await get(`/api/v1/sensors/${id}/data`, { start: start.toISOString(), end: end.toISOString(), max_points: 400 });
      draw();
    } catch (err) {
      showError(err);
    }
  };

  const drawControls = () => {
    mount(rangeButtons, RANGES.map((r) => h("button", { "aria-pressed": r === range ? "true" : "false", onclick: () => ((range = r), drawControls(), load()) }, r.label)));
    mount(
      metricBoxes,
      sensor.metrics.map((/** @type {any} */ m) =>
        h("button", { "aria-pressed": shown.has(m.name) ? "true" : "false", onclick: () => (shown.has(m.name) ? shown.delete(m.name) : shown.add(m.name), drawControls(), draw()) }, metricLabel(m.name)),
      ),
    );
  };
  drawControls();
  await load();
  if (!ctx.isCurrent()) return;

  const cal = sensor.calibration;
  mount(
    ctx.main,
    h("div", { class: "screen-title" }, h("h1", null, sensor.name), h("small", null, `${sensor.device_type} · ${sensor.location || "no location"} · `, h("span", { class: `status-${sensor.status}` }, sensor.status), ` · last reading ${when(sensor.last_reading)}`)),
    h("div", { class: "panel controls" }, h("p", { class: "label" }, "Range"), rangeButtons, h("p", { class: "label" }, "Metrics"), metricBoxes),
    stats,
    h("div", { class: "panel" }, chartBox),
    h(
      "section",
      { class: "panel", "aria-labelledby": "cal-title" },
      h("h2", { id: "cal-title" }, "Calibration"),
      cal
        ? h("p", null, cal.active.length ? cal.active.map((/** @type {any} */ a) => `${metricLabel(a.metric)}: ${a.method}, ${when(a.performed_at)}`).join("; ") : "Not calibrated.", " ", ctx.service === "agent" ? h("a", { class: "button", href: `#/calibrate?sensor=${id}` }, "Calibrate") : null)
        : h("p", null, "This sensor has no calibration procedure."),
      history.calibrations && history.calibrations.length
        ? h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Scrollable table" }, h("table", null,
            h("thead", null, h("tr", null, ["When", "Metric", "Method", "Points", "By", "Active"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", null, history.calibrations.map((/** @type {any} */ c) => h("tr", null,
              h("td", null, when(c.performed_at)), h("td", null, metricLabel(c.metric)), h("td", null, c.method),
              h("td", null, (c.points || []).length), h("td", null, c.performed_by_email || c.performed_by || "–"), h("td", null, c.active ? "yes" : "")))))) 
        : null,
    ),
  );

  new LiveStream("sensor-data", device.farm_id, (msg) => {
    if (msg.type !== "reading" || msg.data.device_id !== id || !data || range.ms > 86400_000) return;
    const series = data.series.find((/** @type {any} */ s) => s.metric === msg.data.metric);
    if (!series) return;
    series.points.push({ timestamp: msg.timestamp, value: msg.data.value, min: msg.data.value, max: msg.data.value, count: 1 });
    draw();
  }, { deviceIds: [id] });
}

/**
 * The bands to shade behind the series shown: the climate band of temperature and humidity,
 * and each enabled alert rule's thresholds.
 * @param {any[]} visible @param {any} climate @param {any[]} rules
 * @returns {import("../chart.js").Band[]}
 */
function bandsOf(visible, climate, rules) {
  /** @type {import("../chart.js").Band[]} */
  const bands = [];
  for (const s of visible) {
    const target = climate && (s.metric === "temperature" || s.metric === "humidity") ? climate[s.metric] : null;
    if (target) {
      const lo = target.target - target.band;
      const hi = target.target + target.band;
      bands.push({ unit: s.unit, lo, hi, kind: "ok", label: `Climate band: ${formatValue(s.metric, lo, s.unit)} to ${formatValue(s.metric, hi, s.unit)}` });
    }
    for (const rule of rules.filter((r) => r.metric === s.metric)) {
      bands.push({ unit: s.unit, lo: rule.below, hi: rule.above, kind: "alert", label: `Alert "${rule.name}"` });
    }
  }
  return bands;
}

/** The chart drawn at the size it is shown (its text then reads at its real size on a phone).
 * @param {HTMLElement} main */
function chartSize(main) {
  const width = Math.round(Math.min(1300, Math.max(320, main.clientWidth - 70)));
  return { width, height: width < 600 ? 280 : 320 };
}
