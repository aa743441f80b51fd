// Farm overview: rows, racks and shelves as a grid; each shelf with its crop, plan stage and day
// and its latest readings, kept live from the streams. Offline sensors, active alerts and
// readings outside the climate band stand out.

import { h, mount, num, when } from "../dom.js";
import { SHELF_METRICS, latestValues, loadFarm, placeSensors, shelfMetric } from "../farmdata.js";
import { get } from "../api.js";
import { SYNCED, LiveStream } from "../streams.js";

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) {
    mount(ctx.main, h("div", { class: "panel" }, h("h1", null, "No farm yet"), h("p", null, "You have no farm, or none shared with you. An administrator can give you access.")));
    return;
  }
  const data = await loadFarm(farm.id);
  const { byShelf, unplaced } = placeSensors(data.rows, data.sensors);
  /** @type {Map<string, Record<string, number>>} latest value per sensor and metric */
  const values = new Map();
  const latest = await Promise.all(data.sensors.map((s) => latestValues(s).catch(() => ({}))));
  data.sensors.forEach((s, i) => values.set(s.id, latest[i]));
  if (!ctx.isCurrent()) return;

  const grid = h("div", { class: "rows" });
  const summary = h("div", { class: "summary" });
  const others = h("div", { class: "others" });

  const draw = () => {
    mount(summary, summaryCards(data));
    mount(grid, data.rows.length ? data.rows.map((row) => rowView(row, data, byShelf, values)) : h("p", null, "This farm has no rows yet."));
    mount(others, unplaced.length ? [h("h2", null, "Other sensors"), h("div", { class: "sensor-list" }, unplaced.map((s) => sensorCard(s, values, data)))] : null);
  };
  draw();
  mount(
    ctx.main,
    h("h1", { class: "screen-title" }, farm.name, h("small", null, farm.location)),
    SYNCED ? h("p", { class: "hint" }, "Synced from the farm's agent: values update as its data arrives; control it from the farm's own app.") : null,
    summary,
    grid,
    others,
  );

  let pending = 0;
  const redraw = () => {
    if (!pending) pending = window.setTimeout(() => ((pending = 0), draw()), 250);
  };
  new LiveStream("sensor-data", farm.id, (msg) => {
    if (msg.type !== "reading") return;
    const sensor = data.sensors.find((s) => s.id === msg.data.device_id);
    if (!sensor) return;
    const current = values.get(sensor.id) || {};
    current[msg.data.metric] = msg.data.value;
    values.set(sensor.id, current);
    sensor.last_reading = msg.timestamp;
    sensor.status = "online";
    redraw();
  });
  new LiveStream("device-events", farm.id, (msg) => {
    const d = msg.data || {};
    if (d.event !== "availability") return;
    const device = [...data.sensors, ...data.devices].filter((x) => x.id === d.device_id);
    for (const x of device) x.status = d.status;
    redraw();
  });
  new LiveStream("farm-status", farm.id, async (msg) => {
    if (msg.type === "alert") {
      const list = await get("/api/v1/alerts", { farm_id: farm.id, state: "active", limit: 500 });
      data.alerts = list.alerts;
      redraw();
    }
  });
}

/** @param {any} data */
function summaryCards(data) {
  const offline = [...data.sensors, ...data.devices.filter((d) => d.kind !== "sensor")].filter((d) => d.status === "offline");
  const farmClimate = data.climate.find((/** @type {any} */ c) => !c.row_id);
  const live = farmClimate ? farmClimate.state : null;
  return [
    stat("Sensors online", `${data.sensors.length - data.sensors.filter((/** @type {any} */ s) => s.status === "offline").length} / ${data.sensors.length}`, offline.length ? "warn" : ""),
    stat("Active alerts", String(data.alerts.length), data.alerts.length ? "bad" : ""),
    stat("Growing", `${data.plans.length} plan${data.plans.length === 1 ? "" : "s"}`, ""),
    live && live.temperature ? stat("Air", `${num(live.temperature.value)} °C · ${live.humidity ? num(live.humidity.value, 0) + " %" : "–"}`, "") : null,
    live ? stat("Climate", `${live.mode || "not set"}${live.failsafe ? " · fail-safe" : ""}${live.fan_speed !== null ? ` · fans ${live.fan_speed}%` : ""}`, live.failsafe ? "bad" : "") : null,
    offline.length ? h("div", { class: "stat warn wide" }, h("span", null, "Offline"), h("strong", null, offline.map((d) => d.name).join(", "))) : null,
  ];
}

/** @param {string} label @param {string} value @param {string} tone */
function stat(label, value, tone) {
  return h("div", { class: `stat ${tone}` }, h("span", null, label), h("strong", null, value));
}

/** The climate band that applies to a shelf's metric, if any. */
function bandFor(metric, row, shelf, data) {
  const settings = (data.climate.find((/** @type {any} */ c) => c.row_id === row.id) || data.climate.find((/** @type {any} */ c) => !c.row_id) || {}).settings;
  if (settings && (metric === "temperature" || metric === "humidity") && settings[metric]) return settings[metric];
  const plan = data.plans.find((/** @type {any} */ p) => p.shelves.some((/** @type {any} */ s) => s.shelf_id === shelf.id));
  const stageIndex = plan && plan.progress ? plan.progress.current_stage_index : null;
  if (plan && stageIndex !== null && (metric === "temperature" || metric === "humidity")) return plan.stages[stageIndex][metric];
  return null;
}

function rowView(row, data, byShelf, values) {
  return h(
    "section",
    { class: "row", "aria-labelledby": `row-${row.id}` },
    h("h2", { id: `row-${row.id}` }, row.name),
    h("div", { class: "racks" }, row.racks.map((rack) => h("div", { class: "rack" }, h("h3", null, rack.name), rack.shelves.map((shelf) => shelfView(shelf, row, data, byShelf, values))))),
  );
}

function shelfView(shelf, row, data, byShelf, values) {
  const sensors = byShelf.get(shelf.id) || [];
  const plan = data.plans.find((/** @type {any} */ p) => p.shelves.some((/** @type {any} */ s) => s.shelf_id === shelf.id));
  const progress = plan ? plan.progress : null;
  const alerts = data.alerts.filter((/** @type {any} */ a) => sensors.some((/** @type {any} */ s) => s.id === a.device_id));
  const offline = sensors.filter((/** @type {any} */ s) => s.status === "offline");
  const chips = SHELF_METRICS.map((m) => {
    for (const s of sensors) {
      const v = values.get(s.id) || {};
      const key = Object.keys(v).find((k) => shelfMetric(k) === m.key);
      if (key === undefined) continue;
      const band = bandFor(m.key, row, shelf, data);
      const out = band && Math.abs(v[key] - band.target) > band.band;
      return h(
        "a",
        { class: `chip${out ? " out" : ""}${s.status === "offline" ? " stale" : ""}`, href: `#/sensors/${s.id}`, title: out ? `Outside ${band.target} ± ${band.band}` : s.name, "data-metric": m.key },
        h("span", null, m.label),
        h("strong", null, `${num(v[key], m.digits)}${m.unit}`),
        out ? h("em", { class: "sr-only" }, " out of band") : null,
      );
    }
    return null;
  }).filter(Boolean);
  const crop = plan ? plan.species_name : shelf.current_species;
  return h(
    "article",
    { class: `shelf${alerts.length ? " alerting" : ""}${offline.length ? " has-offline" : ""}`, "data-shelf": shelf.name },
    h("header", null, h("h4", null, shelf.name), crop ? h("span", { class: "crop" }, crop) : h("span", { class: "crop empty" }, "empty")),
    progress
      ? h("p", { class: "stage" }, `${progress.current_stage || "—"} · day ${progress.day}/${progress.total_days}`, progress.harvest_ready ? h("strong", null, " · ready to harvest") : null)
      : shelf.current_plant_count ? h("p", { class: "stage" }, `${shelf.current_plant_count} plants`) : null,
    chips.length ? h("div", { class: "chips" }, chips) : null,
    alerts.length ? h("p", { class: "badge bad" }, `${alerts.length} alert${alerts.length > 1 ? "s" : ""}: ${alerts.map((/** @type {any} */ a) => a.metric).join(", ")}`) : null,
    offline.length ? h("p", { class: "badge warn" }, `Offline: ${offline.map((/** @type {any} */ s) => s.name).join(", ")}`) : null,
  );
}

function sensorCard(sensor, values, data) {
  const v = values.get(sensor.id) || {};
  const alerting = data.alerts.some((/** @type {any} */ a) => a.device_id === sensor.id);
  return h(
    "a",
    { class: `sensor-card${sensor.status === "offline" ? " stale" : ""}${alerting ? " alerting" : ""}`, href: `#/sensors/${sensor.id}` },
    h("strong", null, sensor.name),
    h("span", { class: "where" }, sensor.location || "no location"),
    h("span", { class: "values" }, Object.entries(v).map(([k, x]) => h("span", { "data-metric": k }, `${k} ${num(x, 2)}`))),
    h("span", { class: "when" }, sensor.status === "offline" ? "offline" : when(sensor.last_reading)),
  );
}
