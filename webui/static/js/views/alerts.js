// Alerts and events: the alerts table (live: a raised or cleared alert shows without a reload;
// active or all, in pages), the alert rules (threshold, hysteresis, minimum duration) with add
// and delete, and the live event list with repeated events grouped (one line and one
// Acknowledge per kind and device, however many times it happened).

import { all, call, currentUser, get } from "../api.js";
import { field, h, mount, num, when } from "../dom.js";
import { SHELF_METRICS, metricInfo, optional } from "../farmdata.js";
import { confirmDialog, messageOf, showError, toast } from "../notify.js";
import { LiveStream } from "../streams.js";

const ALERT_PAGE = 50;
const EVENT_PAGE = 200;
/** A burst of alert messages costs one read of the table. */
const ALERT_DEBOUNCE_MS = 500;

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const role = currentUser()?.role || "";
  const canWrite = ctx.service === "agent" && ["admin", "farm_manager", "operator"].includes(role);
  const [events, rules, devices, sensors] = await Promise.all([
    get("/api/v1/events", { farm_id: farm.id, limit: EVENT_PAGE }).then((e) => e.events),
    optional(get("/api/v1/alert-rules", { farm_id: farm.id, limit: 500 }).then((r) => r.alert_rules), []),
    all("/api/v1/devices", "devices", { farm_id: farm.id }),
    optional(all("/api/v1/sensors", "sensors", { farm_id: farm.id }), null),
  ]);
  const names = new Map(devices.map((d) => [d.id, d.name]));
  const alerts = new AlertsTable(farm.id, names);
  await alerts.load();
  const groups = new EventGroups(farm.id, names, canWrite);
  groups.fill(events);
  // Sensors only (never a fan), each with the metrics its profile reports.
  const ruleSensors = sensors || devices.filter((d) => d.kind === "sensor").map((d) => ({ ...d, metrics: [] }));
  if (!ctx.isCurrent()) return;
  mount(
    ctx.main,
    h("h1", null, "Alerts and events"),
    alerts.el,
    rulesPanel(ctx, rules, ruleSensors, names, canWrite && role !== "operator"),
    h("section", { class: "panel", "aria-labelledby": "events-title" }, h("h2", { id: "events-title" }, "Events (live)"), groups.tools, groups.found, groups.el),
  );
  let pending = 0;
  new LiveStream("farm-status", farm.id, (msg) => {
    if (msg.type === "alert" && !pending) {
      pending = window.setTimeout(() => {
        pending = 0;
        void alerts.load();
      }, ALERT_DEBOUNCE_MS);
    }
    if (!msg.data || !msg.data.event_id) return;
    groups.add({ ...msg.data, id: msg.data.event_id, kind: msg.data.kind || msg.type, timestamp: msg.timestamp, acknowledged_at: null });
  });
}

class AlertsTable {
  /** @param {string} farmId @param {Map<string, string>} names */
  constructor(farmId, names) {
    this.farmId = farmId;
    this.names = names;
    this.state = "active";
    this.q = "";
    this.offset = 0;
    this.seq = 0;
    this.tbody = h("tbody");
    this.found = h("p", { class: "hint", role: "status" });
    this.pager = h("div", { class: "pager" });
    this.wrap = h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Alerts table" });
    mount(this.wrap, h("table", { class: "compact" },
      h("thead", null, h("tr", null, ["State", "Sensor", "Metric", "Raised", "Value", "Cleared"].map((t) => h("th", { scope: "col" }, t)))),
      this.tbody));
    const choice = h("select", { name: "alert-state" }, [["active", "Active"], ["", "All"], ["cleared", "Cleared"]].map(([v, t]) => h("option", { value: v }, t)));
    choice.addEventListener("change", () => {
      this.state = /** @type {HTMLSelectElement} */ (choice).value;
      this.offset = 0;
      void this.load();
    });
    this.el = h(
      "section",
      { class: "panel", "aria-labelledby": "alerts-title" },
      h("h2", { id: "alerts-title" }, "Alerts"),
      h("div", { class: "list-tools" }, field("Show", choice), searchField("alerts-search", "Sensor, metric or severity", (q) => {
        this.q = q;
        this.offset = 0;
        void this.load();
      })),
      this.found,
      this.wrap,
      this.pager,
    );
  }

  /** Read the page shown and put it in the table. */
  async load() {
    const mine = ++this.seq;
    let page;
    try {
      page = await optional(get("/api/v1/alerts", { farm_id: this.farmId, state: this.state, ...(this.q ? { q: this.q } : {}), limit: ALERT_PAGE, offset: this.offset }), { alerts: [], total: 0 });
    } catch (err) {
      this.found.textContent = messageOf(err);
      return;
    }
    if (mine !== this.seq) return;
    mount(this.tbody, page.alerts.map((/** @type {any} */ a) => h("tr", { class: a.state === "active" ? "alert-active" : "", "data-alert": a.id },
      h("td", null, h("span", { class: `badge ${a.state === "active" ? "bad" : "ok"}` }, a.state)),
      h("td", null, this.names.get(a.device_id) || a.device_id.slice(0, 8)),
      h("td", null, `${metricInfo(a.metric).label} ${a.direction} ${num(a.threshold, 2)}`),
      h("td", null, when(a.raised_at)),
      h("td", null, num(a.raised_value, 2)),
      h("td", null, a.cleared_at ? `${when(a.cleared_at)} (${a.cleared_reason || num(a.cleared_value, 2)})` : "–"))));
    this.wrap.hidden = page.alerts.length === 0;
    this.found.textContent = page.total ? `${this.offset + 1}–${this.offset + page.alerts.length} of ${page.total}` : "No alerts.";
    const last = this.offset + page.alerts.length;
    mount(
      this.pager,
      page.total > ALERT_PAGE ? [
        h("button", { type: "button", disabled: this.offset === 0, onclick: () => { this.offset = Math.max(0, this.offset - ALERT_PAGE); void this.load(); } }, "Newer"),
        h("button", { type: "button", disabled: last >= page.total, onclick: () => { this.offset += ALERT_PAGE; void this.load(); } }, "Older"),
      ] : null,
    );
  }
}

/** Events of one kind and device not yet acknowledged, shown as one line. */
class EventGroup {
  /** @param {any} e the first event @param {EventGroups} owner */
  constructor(e, owner) {
    this.kind = e.kind;
    this.deviceId = e.device_id || null;
    this.count = 0;
    this.latest = e.timestamp;
    this.severity = "debug";
    this.badge = h("span", { class: "badge ok" });
    this.times = h("span", { class: "times" });
    this.when = h("span", null);
    this.message = h("span", { class: "hint" });
    const device = this.deviceId && owner.names.get(this.deviceId);
    this.ack = owner.canWrite && !e.acknowledged_at
      ? h("button", { type: "button", onclick: () => this.acknowledge(owner) }, "Acknowledge")
      : null;
    this.el = h(
      "li",
      { class: "event event-group" },
      this.badge,
      h("strong", null, e.kind.replace(/_/g, " ")),
      device ? ` · ${device}` : "",
      this.times,
      this.when,
      this.message,
      this.ack,
      e.acknowledged_at ? h("span", { class: "badge ok" }, "acknowledged") : null,
    );
  }

  /** Count one more event (in place: the button under a finger stays). @param {any} e */
  add(e) {
    this.count += 1;
    if (!this.latest || e.timestamp >= this.latest) {
      this.latest = e.timestamp;
      this.message.textContent = e.message || "";
    }
    const order = ["debug", "info", "warning", "error", "critical"];
    if (order.indexOf(e.severity) > order.indexOf(this.severity)) this.severity = e.severity;
    this.badge.textContent = this.severity || "info";
    this.badge.className = `badge ${this.severity === "critical" || this.severity === "error" ? "bad" : this.severity === "warning" ? "warn" : "ok"}`;
    this.times.textContent = this.count > 1 ? `× ${this.count}` : "";
    this.when.textContent = ` · ${when(this.latest)}`;
    if (this.ack) this.ack.textContent = this.count > 1 ? `Acknowledge all ${this.count}` : "Acknowledge";
  }

  /** @param {EventGroups} owner */
  async acknowledge(owner) {
    try {
      const done = await call("POST", "/api/v1/events/acknowledge", { farm_id: owner.farmId, kind: this.kind, device_id: this.deviceId, until: this.latest });
      owner.retire(this);
      if (this.ack) this.ack.replaceWith(h("span", { class: "badge ok" }, `acknowledged${done.acknowledged > 1 ? ` (${done.acknowledged})` : ""}`));
      this.ack = null;
    } catch (err) {
      showError(err);
    }
  }
}

class EventGroups {
  /** @param {string} farmId @param {Map<string, string>} names @param {boolean} canWrite */
  constructor(farmId, names, canWrite) {
    this.farmId = farmId;
    this.names = names;
    this.canWrite = canWrite;
    /** @type {Map<string, EventGroup>} open groups by kind and device */
    this.open = new Map();
    this.el = h("ul", { class: "event-list", "aria-live": "polite" });
    this.filter = { acknowledged: "", severity: "", q: "" };
    this.found = h("p", { class: "hint", role: "status" });
    const choose = (/** @type {"acknowledged"|"severity"} */ key, /** @type {string} */ label, /** @type {string[][]} */ options) => {
      const select = h("select", { name: `events-${key}` }, options.map(([v, t]) => h("option", { value: v }, t)));
      select.addEventListener("change", () => {
        this.filter[key] = /** @type {HTMLSelectElement} */ (select).value;
        void this.reload();
      });
      return field(label, select);
    };
    this.tools = h(
      "div",
      { class: "list-tools" },
      choose("acknowledged", "Events to show", [["", "All"], ["false", "To acknowledge"], ["true", "Acknowledged"]]),
      choose("severity", "Severity", [["", "Any"], ["critical", "critical"], ["error", "error"], ["warning", "warning"], ["info", "info"]]),
      searchField("events-search", "Kind or message", (q) => {
        this.filter.q = q;
        void this.reload();
      }),
    );
  }

  /** Show these events (newest first, as listed), grouped. @param {any[]} events */
  fill(events) {
    this.open.clear();
    this.el.replaceChildren();
    for (const e of [...events].reverse()) this.add(e, true);
    this.found.textContent = events.length ? "" : "No events.";
  }

  /** Read the events the filters ask for (a person's choice: the list is drawn again). */
  async reload() {
    try {
      const page = await get("/api/v1/events", { farm_id: this.farmId, limit: EVENT_PAGE, ...Object.fromEntries(Object.entries(this.filter).filter(([, v]) => v)) });
      this.fill(page.events);
    } catch (err) {
      this.found.textContent = messageOf(err);
    }
  }

  /** Whether a live event passes the filters. @param {any} e */
  wants(e) {
    const q = this.filter.q.toLowerCase();
    const found = !q || e.kind.toLowerCase().includes(q) || (e.message || "").toLowerCase().includes(q);
    return this.filter.acknowledged !== "true" && (!this.filter.severity || e.severity === this.filter.severity) && found;
  }

  /** Add an event, newest last: to its open group, or as a new line on top. @param {any} e @param {boolean} [listed] */
  add(e, listed = false) {
    if (!listed && !this.wants(e)) return;
    this.found.textContent = "";
    const key = `${e.acknowledged_at ? "seen" : "new"}|${e.kind}|${e.device_id || ""}`;
    let group = this.open.get(key);
    if (!group) {
      group = new EventGroup(e, this);
      this.open.set(key, group);
      this.el.prepend(group.el);
    }
    group.add(e);
  }

  /** A group acknowledged: later events of its kind start a new line. @param {EventGroup} group */
  retire(group) {
    for (const [key, g] of this.open) if (g === group) this.open.delete(key);
  }
}

/**
 * The rule form offers sensors only, and each sensor's own metrics.
 * @param {any} ctx @param {any[]} rules @param {any[]} sensors @param {Map<string,string>} names @param {boolean} canManage
 */
/** Typing in a search box asks the server after this pause. */
const SEARCH_PAUSE_MS = 300;

/**
 * A search box that calls ``onSearch`` with its trimmed text once typing pauses.
 * @param {string} id @param {string} placeholder @param {(q: string) => void} onSearch
 */
function searchField(id, placeholder, onSearch) {
  const input = h("input", { type: "search", id, name: id, placeholder, autocomplete: "off" });
  /** @type {ReturnType<typeof setTimeout>|undefined} */
  let timer;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => onSearch(/** @type {HTMLInputElement} */ (input).value.trim()), SEARCH_PAUSE_MS);
  });
  return h("div", { class: "field search" }, h("label", { for: id }, "Search"), input);
}

function rulesPanel(ctx, rules, sensors, names, canManage) {
  const device = h("select", { name: "device" }, sensors.map((/** @type {any} */ d) => h("option", { value: d.id }, d.name)));
  const metric = h("select", { name: "metric", required: true });
  const fillMetrics = () => {
    const sensor = sensors.find((/** @type {any} */ s) => s.id === /** @type {any} */ (device).value);
    const listed = sensor && sensor.metrics.length ? sensor.metrics : SHELF_METRICS.map((m) => ({ name: m.key, unit: m.unit.trim() }));
    mount(metric, listed.map((/** @type {any} */ m) => h("option", { value: m.name }, `${metricInfo(m.name, m.unit).label}${m.unit ? ` (${m.unit})` : ""}`)));
  };
  device.addEventListener("change", fillMetrics);
  fillMetrics();
  const direction = h("select", { name: "direction" }, ["above", "below"].map((d) => h("option", { value: d }, d)));
  const name = h("input", { name: "name", maxlength: 200 });
  const threshold = h("input", { name: "threshold", type: "number", step: "any", required: true, value: 28 });
  const hysteresis = h("input", { name: "hysteresis", type: "number", step: "any", min: 0, value: 0.5 });
  const duration = h("input", { name: "duration", type: "number", min: 0, value: 60 });
  const severity = h("select", { name: "severity" }, ["warning", "critical", "info"].map((s) => h("option", { value: s }, s)));
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { "aria-label": "New alert rule" },
    h("h3", null, "New rule"),
    h("div", { class: "form-grid" }, field("Name", name), field("Sensor", device), field("Metric", metric), field("When the value is", direction), field("Threshold", threshold), field("Hysteresis", hysteresis, "How far back it must come to clear"), field("For at least (s)", duration), field("Severity", severity)),
    error,
    h("button", { type: "submit", class: "primary" }, "Add rule"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = (/** @type {any} */ x) => x.value;
    try {
      await call("POST", "/api/v1/alert-rules", {
        device_id: v(device),
        metric: v(metric),
        name: v(name),
        [v(direction)]: Number(v(threshold)),
        hysteresis: Number(v(hysteresis)),
        min_duration_s: Number(v(duration)),
        severity: v(severity),
      });
      toast("Rule added");
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": "rules-title" },
    h("h2", { id: "rules-title" }, "Alert rules"),
    rules.length
      ? h("ul", null, rules.map((/** @type {any} */ r) => h("li", null,
          `${r.name ? r.name + ": " : ""}${names.get(r.device_id) || "sensor"} ${metricInfo(r.metric).label}${r.above !== null ? ` above ${num(r.above, 2)}` : ""}${r.below !== null ? ` below ${num(r.below, 2)}` : ""} (hysteresis ${num(r.hysteresis, 2)}, for ${r.min_duration_s} s) · ${r.severity}${r.enabled ? "" : " · off"} `,
          canManage ? h("button", { class: "danger", "aria-label": `Delete rule ${r.name || r.metric}`, onclick: async () => {
            if (!(await confirmDialog("Delete this rule?", "Its alerts stay in the history.", "Delete"))) return;
            try {
              await call("DELETE", `/api/v1/alert-rules/${r.id}`);
              ctx.reload();
            } catch (err) {
              showError(err);
            }
          } }, "Delete") : null)))
      : h("p", null, "No rules yet."),
    canManage && sensors.length ? form : null,
  );
}
