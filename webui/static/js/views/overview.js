// Farm overview: the whole farm at a glance from one request (GET /farms/{id}/overview). Each row
// and rack says how many shelves are out of band, how many devices are offline and how many
// alerts are active; racks unfold to their shelves, each shelf showing every metric over its
// sensors (mean, with the range when several report). Readings arrive in batches from the
// stream and update the values in place, once per frame: nothing a finger or the keyboard may
// be on is ever replaced.

import { h, mount, num, when } from "../dom.js";
import { loadOverview, metricInfo, metricOrder, optional } from "../farmdata.js";
import { get } from "../api.js";
import { SYNCED, LiveStream, perFrame, readingsOf } from "../streams.js";

/** A farm with more shelves than this opens with its racks folded. */
const FOLD_OVER = 40;
/** More sensors than this on no shelf start folded. */
const FOLD_OTHERS_OVER = 12;
/** Stream readings come in one message per this many milliseconds. */
const BATCH_MS = 250;
/** The overview is read again at most this often after alerts or devices change. */
const REFRESH_MS = 5_000;

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) {
    mount(ctx.main, h("div", { class: "panel" }, h("h1", null, "No farm yet"), h("p", null, "You have no farm, or none shared with you. An administrator can give you access.")));
    return;
  }
  const [data, climate] = await Promise.all([
    loadOverview(farm.id, { fresh: true }),
    optional(get("/api/v1/climate-control", { farm_id: farm.id }), { climate_controls: [] }),
  ]);
  if (!ctx.isCurrent()) return;
  const view = new FarmView(data, climate.climate_controls);
  mount(
    ctx.main,
    h("h1", { class: "screen-title" }, farm.name, h("small", null, farm.location)),
    SYNCED ? h("p", { class: "hint" }, "Synced from the farm's agent: values update as its data arrives; control it from the farm's own app.") : null,
    view.el,
  );

  let last = Date.now();
  let timer = 0;
  const refresh = () => {
    if (timer) return;
    timer = window.setTimeout(async () => {
      last = Date.now();
      try {
        const fresh = await loadOverview(farm.id, { fresh: true });
        if (ctx.isCurrent()) view.apply(fresh);
      } catch {
        /* the connection banner tells; the next change tries again */
      } finally {
        timer = 0;
      }
    }, Math.max(1000, REFRESH_MS - (Date.now() - last)));
  };
  const readings = perFrame((/** @type {any[][]} */ batches) => view.readings(batches.flat()));
  new LiveStream("sensor-data", farm.id, (msg) => readings(readingsOf(msg)), { batchMs: BATCH_MS });
  new LiveStream("device-events", farm.id, (msg) => {
    const d = msg.data || {};
    if (d.event !== "availability") return;
    view.availability(d.device_id, d.status);
    refresh(); // devices other than sensors are counted by the server
  });
  new LiveStream("farm-status", farm.id, (msg) => {
    if (msg.type === "alert") refresh();
  });
}

/** Text and visibility of a count badge, changed only when they differ. @param {HTMLElement} el @param {number} n @param {string} one @param {string} many */
function setCount(el, n, one, many) {
  const text = `${n} ${n === 1 ? one : many}`;
  if (el.textContent !== text) el.textContent = text;
  if (el.hidden !== (n === 0)) el.hidden = n === 0;
}

/** @param {HTMLElement} el @param {string} text */
function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

/** Count badges of a part of the farm. */
function badges() {
  const out = h("span", { class: "count bad", hidden: true });
  const offline = h("span", { class: "count warn", hidden: true });
  const alerts = h("span", { class: "count bad", hidden: true });
  const el = h("span", { class: "counts" }, out, offline, alerts);
  /** @param {{out: number, offline: number, alerts: number}} c */
  const show = (c) => {
    setCount(out, c.out, "shelf out of band", "shelves out of band");
    setCount(offline, c.offline, "offline", "offline");
    setCount(alerts, c.alerts, "alert", "alerts");
  };
  return { el, show };
}

class FarmView {
  /** @param {any} data the overview @param {any[]} climate */
  constructor(data, climate) {
    /** @type {Map<string, SensorState>} */
    this.sensors = new Map();
    /** @type {ShelfView[]} */
    this.shelves = [];
    /** @type {RackView[]} */
    this.racks = [];
    /** @type {RowView[]} */
    this.rows = [];
    /** @type {{name: string, target: () => HTMLElement, open: () => void}[]} */
    this.places = [];
    this.data = data;
    const fold = data.counts.shelves > FOLD_OVER;
    for (const sensor of [...data.rows.flatMap((/** @type {any} */ r) => r.racks.flatMap((/** @type {any} */ k) => k.shelves.flatMap((/** @type {any} */ s) => s.sensors))), ...data.unplaced]) {
      if (!this.sensors.has(sensor.id)) this.sensors.set(sensor.id, new SensorState(sensor));
    }
    this.summary = new Summary(climate);
    this.grid = h("div", { class: "rows" });
    for (const row of data.rows) {
      const rowView = new RowView(row, fold, this);
      this.rows.push(rowView);
      this.grid.append(rowView.el);
    }
    for (const sensor of this.sensors.values()) {
      const shelf = sensor.shelves[0];
      if (shelf) this.places.push({ name: sensor.name, target: () => /** @type {HTMLElement} */ (shelf.el.querySelector("h4")), open: () => (shelf.rack.el.open = true) });
    }
    this.others = h("div", { class: "sensor-list" });
    for (const sensor of data.unplaced) {
      const state = /** @type {SensorState} */ (this.sensors.get(sensor.id));
      this.others.append(state.card());
    }
    this.calm = h("p", { class: "panel calm", hidden: true }, "Nothing needs a look: every shelf is in band, every device answers, no alert is active.");
    const tools = this.toolbar(fold);
    this.el = h(
      "div",
      { class: "overview" },
      this.summary.el,
      tools,
      this.calm,
      data.rows.length ? this.grid : h("p", null, "This farm has no shelves yet."),
      data.unplaced.length
        ? h("section", { class: "others", "aria-labelledby": "others-title" },
            // Many sensors on no shelf (a farm that has not placed them yet) start folded.
            h("details", { open: data.unplaced.length <= FOLD_OTHERS_OVER },
              h("summary", null, h("h2", { id: "others-title" }, `Other sensors (${data.unplaced.length})`)),
              this.others))
        : null,
    );
    for (const shelf of this.shelves) shelf.refresh();
    this.recount();
  }

  /** Jump to a place, fold or unfold every rack, show only what needs a look. @param {boolean} fold */
  toolbar(fold) {
    const options = h("datalist", { id: "overview-places" }, this.places.map((p) => h("option", { value: p.name })));
    const input = h("input", { type: "search", name: "place", list: "overview-places", placeholder: "Row, rack, shelf or sensor", "aria-label": "Jump to a row, rack, shelf or sensor", autocomplete: "off" });
    const message = h("span", { class: "hint", role: "status" });
    const jump = h(
      "form",
      { class: "jump", role: "search" },
      input,
      h("button", { type: "submit" }, "Go"),
      options,
      message,
    );
    jump.addEventListener("submit", (e) => {
      e.preventDefault();
      const wanted = /** @type {HTMLInputElement} */ (input).value.trim().toLowerCase();
      if (!wanted) return;
      const found = this.places.find((p) => p.name.toLowerCase() === wanted) || this.places.find((p) => p.name.toLowerCase().includes(wanted));
      message.textContent = found ? "" : `Nothing named “${/** @type {HTMLInputElement} */ (input).value}”.`;
      if (!found) return;
      this.grid.classList.remove("attention");
      attention.setAttribute("aria-pressed", "false");
      this.calm.hidden = true;
      found.open();
      const target = found.target();
      target.scrollIntoView({ block: "center" });
      target.focus({ preventScroll: true });
    });
    const setAll = (/** @type {boolean} */ open) => {
      for (const rack of this.racks) rack.el.open = open;
    };
    const attention = h("button", { type: "button", "aria-pressed": "false", onclick: () => {
      const on = attention.getAttribute("aria-pressed") !== "true";
      attention.setAttribute("aria-pressed", String(on));
      this.grid.classList.toggle("attention", on);
      this.recount();
    } }, "Needs a look");
    return h(
      "div",
      { class: "overview-tools" },
      jump,
      h("div", { class: "actions" },
        attention,
        h("button", { type: "button", onclick: () => setAll(true) }, "Unfold all"),
        h("button", { type: "button", onclick: () => setAll(false) }, "Fold all"),
      ),
      fold ? h("p", { class: "hint" }, "Racks are folded: open one to see its shelves.") : null,
    );
  }

  /** Readings from the stream, applied in place. @param {any[]} readings */
  readings(readings) {
    /** @type {Set<ShelfView>} */
    const dirty = new Set();
    for (const r of readings) {
      const sensor = this.sensors.get(r.device_id);
      if (!sensor) continue;
      sensor.read(r);
      for (const shelf of sensor.shelves) dirty.add(shelf);
    }
    for (const shelf of dirty) shelf.refresh();
    if (dirty.size) this.recount();
  }

  /** A device came or went. @param {string} deviceId @param {string} status */
  availability(deviceId, status) {
    const sensor = this.sensors.get(deviceId);
    if (!sensor || sensor.status === status) return;
    sensor.setStatus(status);
    for (const shelf of sensor.shelves) shelf.refresh();
    this.recount();
  }

  /** A fresh overview from the server: statuses, values, alerts and offline devices. @param {any} data */
  apply(data) {
    this.data = data;
    const shelves = new Map(data.rows.flatMap((/** @type {any} */ r) => r.racks.flatMap((/** @type {any} */ k) => k.shelves)).map((/** @type {any} */ s) => [s.id, s]));
    for (const sensor of [...shelves.values()].flatMap((s) => s.sensors).concat(data.unplaced)) {
      this.sensors.get(sensor.id)?.update(sensor);
    }
    for (const shelf of this.shelves) {
      const fresh = shelves.get(shelf.shelf.id);
      if (fresh) shelf.adopt(fresh);
      shelf.refresh();
    }
    this.recount();
  }

  recount() {
    for (const rack of this.racks) rack.recount();
    for (const row of this.rows) row.recount();
    this.summary.show(this);
    const calm = this.grid.classList.contains("attention") && this.rows.every((r) => r.el.classList.contains("quiet"));
    if (this.calm.hidden === calm) this.calm.hidden = !calm;
  }
}

class SensorState {
  /** @param {any} sensor an OverviewSensor */
  constructor(sensor) {
    this.id = sensor.id;
    this.name = sensor.name;
    this.location = sensor.location;
    this.status = sensor.status;
    this.lastReading = sensor.last_reading;
    /** @type {Map<string, {value: number, unit: string}>} */
    this.values = new Map(sensor.values.map((/** @type {any} */ v) => [v.metric, { value: v.value, unit: v.unit }]));
    /** @type {ShelfView[]} */
    this.shelves = [];
    /** @type {HTMLElement|null} */
    this.cardEl = null;
  }

  /** @param {any} r a reading */
  read(r) {
    this.values.set(r.metric, { value: r.value, unit: r.unit });
    this.lastReading = r.timestamp;
    if (this.status === "offline") this.status = "online"; // it reads, so it answers
    this.showCard();
  }

  /** @param {string} status */
  setStatus(status) {
    this.status = status;
    this.showCard();
  }

  /** @param {any} sensor an OverviewSensor */
  update(sensor) {
    this.status = sensor.status;
    this.lastReading = sensor.last_reading || this.lastReading;
    for (const v of sensor.values) this.values.set(v.metric, { value: v.value, unit: v.unit });
    this.showCard();
  }

  /** A card for a sensor on no shelf. */
  card() {
    this.values_ = h("span", { class: "values" });
    this.when_ = h("span", { class: "when" });
    this.cardEl = h("a", { class: "sensor-card", href: `#/sensors/${this.id}` }, h("strong", null, this.name), h("span", { class: "where" }, this.location || "no location"), this.values_, this.when_);
    this.showCard();
    return this.cardEl;
  }

  showCard() {
    if (!this.cardEl || !this.values_ || !this.when_) return;
    this.cardEl.classList.toggle("stale", this.status === "offline");
    for (const metric of [...this.values.keys()].sort(metricOrder)) {
      const { value, unit } = /** @type {{value: number, unit: string}} */ (this.values.get(metric));
      const info = metricInfo(metric, unit);
      let span = /** @type {HTMLElement|null} */ (this.values_.querySelector(`[data-metric="${CSS.escape(metric)}"]`));
      if (!span) {
        span = h("span", { "data-metric": metric });
        this.values_.append(span);
      }
      setText(span, `${info.label} ${num(value, info.digits)}${info.unit}`);
    }
    setText(this.when_, this.status === "offline" ? "offline" : when(this.lastReading));
  }
}

class ShelfView {
  /** @param {any} shelf an OverviewShelf @param {RackView} rack @param {FarmView} farm */
  constructor(shelf, rack, farm) {
    this.shelf = shelf;
    this.rack = rack;
    /** @type {SensorState[]} */
    this.sensors = shelf.sensors.map((/** @type {any} */ s) => /** @type {SensorState} */ (farm.sensors.get(s.id)));
    for (const sensor of this.sensors) sensor.shelves.push(this);
    /** @type {Map<string, {target: number, band: number}|null>} */
    this.bands = new Map();
    /** @type {Map<string, {el: HTMLElement, value: HTMLElement, range: HTMLElement, label: HTMLElement}>} */
    this.chips = new Map();
    this.out = false;
    this.offline = 0;
    this.adopt(shelf);
    this.chipBox = h("div", { class: "chips" });
    this.offlineBadge = h("p", { class: "badge warn", hidden: true });
    this.alertBadge = h("p", { class: "badge bad", hidden: true });
    const plan = shelf.plan;
    const crop = shelf.crop;
    this.el = h(
      "article",
      { class: "shelf", "data-shelf": shelf.name, "aria-labelledby": `shelf-${shelf.id}` },
      h("header", null, h("h4", { id: `shelf-${shelf.id}`, tabindex: -1 }, shelf.name), crop ? h("span", { class: "crop" }, crop) : h("span", { class: "crop empty" }, "empty")),
      plan
        ? h("p", { class: "stage" }, `${plan.stage || "—"} · day ${plan.day}/${plan.total_days}`, plan.harvest_ready ? h("strong", null, " · ready to harvest") : null)
        : shelf.plant_count ? h("p", { class: "stage" }, `${shelf.plant_count} plants`) : null,
      this.chipBox,
      this.alertBadge,
      this.offlineBadge,
    );
    farm.places.push({ name: shelf.name, target: () => /** @type {HTMLElement} */ (this.el.querySelector("h4")), open: () => (rack.el.open = true) });
  }

  /** Take what only the server knows: bands, alerts, devices other than sensors offline. @param {any} shelf */
  adopt(shelf) {
    for (const m of shelf.metrics) this.bands.set(m.metric, m.band);
    this.alerts = shelf.counts.alerts;
    this.equipmentOffline = shelf.counts.devices_offline - shelf.counts.sensors_offline;
  }

  /** Recompute each metric over the shelf's sensors and update what changed. */
  refresh() {
    /** @type {Map<string, {sensor: SensorState, value: number, unit: string}[]>} */
    const byMetric = new Map();
    for (const sensor of this.sensors) {
      for (const [metric, v] of sensor.values) {
        if (!byMetric.has(metric)) byMetric.set(metric, []);
        /** @type {any[]} */ (byMetric.get(metric)).push({ sensor, ...v });
      }
    }
    let out = false;
    for (const metric of [...byMetric.keys()].sort(metricOrder)) {
      const members = /** @type {{sensor: SensorState, value: number, unit: string}[]} */ (byMetric.get(metric));
      const band = this.bands.get(metric) || null;
      const values = members.map((m) => m.value);
      const outside = band ? members.filter((m) => Math.abs(m.value - band.target) > band.band) : [];
      const live = members.filter((m) => m.sensor.status !== "offline");
      const mean = values.reduce((a, b) => a + b, 0) / values.length;
      const info = metricInfo(metric, members[0].unit);
      const chip = this.chip(metric, info);
      const sensor = (outside[0] || members[0]).sensor;
      const href = `#/sensors/${sensor.id}`;
      if (chip.el.getAttribute("href") !== href) chip.el.setAttribute("href", href);
      setText(chip.value, `${num(mean, info.digits)}${info.unit}`);
      const low = Math.min(...values);
      const high = Math.max(...values);
      setText(chip.range, members.length > 1 && high > low ? `${num(low, info.digits)}–${num(high, info.digits)}` : "");
      const title = `${info.label}: ${members.length > 1 ? `mean of ${members.length} sensors` : sensor.name}${band ? `; band ${band.target} ± ${band.band}` : ""}${outside.length ? `; out of band: ${outside.map((m) => m.sensor.name).join(", ")}` : ""}`;
      if (chip.el.title !== title) chip.el.title = title;
      chip.el.classList.toggle("out", outside.length > 0);
      chip.el.classList.toggle("stale", live.length === 0);
      out = out || outside.length > 0;
    }
    this.out = out;
    this.offline = this.sensors.filter((s) => s.status === "offline").length;
    const offlineNames = this.sensors.filter((s) => s.status === "offline").map((s) => s.name);
    const offlineText = offlineNames.length ? `Offline: ${offlineNames.length > 3 ? `${offlineNames.length} of ${this.sensors.length} sensors` : offlineNames.join(", ")}` : "";
    setText(this.offlineBadge, offlineText);
    this.offlineBadge.hidden = !offlineText;
    setText(this.alertBadge, this.alerts ? `${this.alerts} alert${this.alerts > 1 ? "s" : ""}` : "");
    this.alertBadge.hidden = !this.alerts;
    this.el.classList.toggle("alerting", this.alerts > 0);
    this.el.classList.toggle("has-offline", this.offline > 0);
    this.el.classList.toggle("out", out);
  }

  /** The chip of a metric, made the first time the metric is seen. @param {string} metric @param {any} info */
  chip(metric, info) {
    let chip = this.chips.get(metric);
    if (!chip) {
      const label = h("span", null, info.label);
      const value = h("strong");
      const range = h("small", { class: "range" });
      const el = h("a", { class: "chip", "data-metric": info.key }, label, value, range);
      chip = { el, value, range, label };
      this.chips.set(metric, chip);
      // Keep the metric order: before the first chip that sorts after it.
      const next = [...this.chips.keys()].filter((m) => m !== metric && metricOrder(m, metric) > 0).sort(metricOrder)[0];
      this.chipBox.insertBefore(el, next ? /** @type {any} */ (this.chips.get(next)).el : null);
    }
    return chip;
  }

  counts() {
    return { out: this.out ? 1 : 0, offline: this.offline + this.equipmentOffline, alerts: this.alerts };
  }
}

class RackView {
  /** @param {any} rack @param {RowView} row @param {boolean} fold @param {FarmView} farm */
  constructor(rack, row, fold, farm) {
    this.row = row;
    this.badges = badges();
    this.shelves = rack.shelves.map((/** @type {any} */ s) => new ShelfView(s, this, farm));
    farm.shelves.push(...this.shelves);
    const title = h("h3", { tabindex: -1 }, rack.name);
    this.el = /** @type {HTMLDetailsElement} */ (h(
      "details",
      { class: "rack", open: !fold, "data-rack": rack.name },
      h("summary", null, title, this.badges.el),
      h("div", { class: "shelves" }, this.shelves.map((/** @type {ShelfView} */ s) => s.el)),
    ));
    farm.places.push({ name: rack.name, target: () => title, open: () => (this.el.open = true) });
  }

  recount() {
    const c = { out: 0, offline: 0, alerts: 0 };
    for (const shelf of this.shelves) {
      const s = shelf.counts();
      c.out += s.out;
      c.offline += s.offline;
      c.alerts += s.alerts;
    }
    this.totals = c;
    this.badges.show(c);
    this.el.classList.toggle("quiet", c.out + c.offline + c.alerts === 0);
  }
}

class RowView {
  /** @param {any} row @param {boolean} fold @param {FarmView} farm */
  constructor(row, fold, farm) {
    this.badges = badges();
    const title = h("h2", { id: `row-${row.id}`, tabindex: -1 }, row.name);
    farm.places.push({ name: row.name, target: () => title, open: () => {} });
    this.racks = row.racks.map((/** @type {any} */ r) => new RackView(r, this, fold, farm));
    farm.racks.push(...this.racks);
    this.el = h(
      "section",
      { class: "row", "aria-labelledby": `row-${row.id}` },
      h("div", { class: "row-head" }, title, this.badges.el),
      h("div", { class: "racks" }, this.racks.map((/** @type {RackView} */ r) => r.el)),
    );
  }

  recount() {
    const c = { out: 0, offline: 0, alerts: 0 };
    for (const rack of this.racks) {
      const t = rack.totals || { out: 0, offline: 0, alerts: 0 };
      c.out += t.out;
      c.offline += t.offline;
      c.alerts += t.alerts;
    }
    this.badges.show(c);
    this.el.classList.toggle("quiet", c.out + c.offline + c.alerts === 0);
  }
}

class Summary {
  /** @param {any[]} climate */
  constructor(climate) {
    const card = (/** @type {string} */ label, /** @type {any} */ value) => h("div", { class: "stat" }, h("span", null, label), value);
    this.sensors = h("strong");
    this.alerts = h("strong");
    this.out = h("strong");
    this.plans = h("strong");
    this.offlineCount = h("strong");
    this.offlineLink = h("a", { href: "#/devices?status=offline" }, "See them");
    this.offlineCard = h("div", { class: "stat warn offline-card" }, h("span", null, "Offline"), h("span", { class: "line" }, this.offlineCount, " ", this.offlineLink));
    const farmClimate = climate.find((/** @type {any} */ c) => !c.row_id);
    const live = farmClimate ? farmClimate.state : null;
    this.cards = [card("Sensors online", this.sensors), card("Active alerts", this.alerts), card("Shelves out of band", this.out), card("Growing", this.plans)];
    this.el = h(
      "div",
      { class: "summary" },
      this.cards,
      live && live.temperature ? h("div", { class: "stat" }, h("span", null, "Air"), h("strong", null, `${num(live.temperature.value)} °C · ${live.humidity ? num(live.humidity.value, 0) + " %" : "–"}`)) : null,
      live && live.co2 ? h("div", { class: "stat" }, h("span", null, "CO₂"), h("strong", null, `${num(live.co2.value, 0)} ppm`)) : null,
      live ? h("div", { class: `stat${live.failsafe ? " bad" : ""}` }, h("span", null, "Climate"), h("strong", null, `${live.mode || "not set"}${live.failsafe ? " · fail-safe" : ""}${live.fan_speed !== null ? ` · fans ${live.fan_speed}%` : ""}`)) : null,
      this.offlineCard,
    );
  }

  /** @param {FarmView} farm */
  show(farm) {
    const sensors = [...farm.sensors.values()];
    const offlineSensors = sensors.filter((s) => s.status === "offline").length;
    setText(this.sensors, `${sensors.length - offlineSensors} / ${sensors.length}`);
    this.cards[0].classList.toggle("warn", offlineSensors > 0);
    const alerts = farm.data.alerts.count;
    setText(this.alerts, String(alerts));
    this.cards[1].classList.toggle("bad", alerts > 0);
    const out = farm.shelves.filter((s) => s.out).length;
    setText(this.out, `${out} of ${farm.shelves.length}`);
    this.cards[2].classList.toggle("bad", out > 0);
    setText(this.plans, `${farm.data.active_plans} plan${farm.data.active_plans === 1 ? "" : "s"}`);
    // Sensors the page saw change, plus the other devices the server counted offline.
    const knownOffline = farm.data.counts.sensors_offline;
    const offline = Math.max(0, farm.data.offline.count - knownOffline + offlineSensors);
    setText(this.offlineCount, `${offline} device${offline === 1 ? "" : "s"}`);
    this.offlineCard.hidden = offline === 0;
  }
}
