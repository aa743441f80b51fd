// Alerts and events: the live event list (acknowledge), active and past alerts, and the alert
// rules (threshold, hysteresis, minimum duration) with add and delete.

import { all, call, currentUser, get } from "../api.js";
import { field, h, mount, num, when } from "../dom.js";
import { optional } from "../farmdata.js";
import { confirmDialog, messageOf, showError, toast } from "../notify.js";
import { LiveStream } from "../streams.js";

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const role = currentUser()?.role || "";
  const canWrite = ctx.service === "agent" && ["admin", "farm_manager", "operator"].includes(role);
  const [events, alerts, rules, devices] = await Promise.all([
    get("/api/v1/events", { farm_id: farm.id, limit: 50 }).then((e) => e.events),
    optional(get("/api/v1/alerts", { farm_id: farm.id, limit: 50 }).then((a) => a.alerts), []),
    optional(get("/api/v1/alert-rules", { farm_id: farm.id, limit: 500 }).then((r) => r.alert_rules), []),
    all("/api/v1/devices", "devices", { farm_id: farm.id }),
  ]);
  const names = new Map(devices.map((d) => [d.id, d.name]));
  const eventList = h("ul", { class: "event-list", "aria-live": "polite" });
  const drawEvents = () => mount(eventList, events.slice(0, 50).map((e) => eventItem(e, names, canWrite)));
  drawEvents();
  mount(
    ctx.main,
    h("h1", null, "Alerts and events"),
    h(
      "section",
      { class: "panel", "aria-labelledby": "alerts-title" },
      h("h2", { id: "alerts-title" }, "Alerts"),
      alerts.length
        ? h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Scrollable table" }, h("table", null,
            h("thead", null, h("tr", null, ["State", "Sensor", "Metric", "Raised", "Value", "Cleared"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", null, alerts.map((a) => h("tr", { class: a.state === "active" ? "alert-active" : "" },
              h("td", null, h("span", { class: `badge ${a.state === "active" ? "bad" : "ok"}` }, a.state)),
              h("td", null, names.get(a.device_id) || a.device_id.slice(0, 8)),
              h("td", null, `${a.metric} ${a.direction} ${num(a.threshold, 2)}`),
              h("td", null, when(a.raised_at)),
              h("td", null, num(a.raised_value, 2)),
              h("td", null, a.cleared_at ? `${when(a.cleared_at)} (${a.cleared_reason || num(a.cleared_value, 2)})` : "–"))))))
        : h("p", null, "No alerts."),
    ),
    rulesPanel(ctx, farm, rules, devices, names, canWrite && role !== "operator"),
    h("section", { class: "panel", "aria-labelledby": "events-title" }, h("h2", { id: "events-title" }, "Events (live)"), eventList),
  );
  new LiveStream("farm-status", farm.id, (msg) => {
    if (!msg.data || !msg.data.event_id) return;
    events.unshift({ ...msg.data, id: msg.data.event_id, kind: msg.data.kind || msg.type, timestamp: msg.timestamp, acknowledged_at: null });
    drawEvents();
  });
}

/** @param {any} e @param {Map<string,string>} names @param {boolean} canWrite */
function eventItem(e, names, canWrite) {
  const ack = h("button", {
    onclick: async () => {
      try {
        await call("POST", `/api/v1/events/${e.id}/acknowledge`);
        e.acknowledged_at = new Date().toISOString();
        ack.replaceWith(h("span", { class: "badge ok" }, "acknowledged"));
      } catch (err) {
        showError(err);
      }
    },
  }, "Acknowledge");
  return h(
    "li",
    { class: `event sev-${e.severity}` },
    h("span", { class: `badge ${e.severity === "critical" || e.severity === "error" ? "bad" : e.severity === "warning" ? "warn" : "ok"}` }, e.severity || "info"),
    " ",
    h("strong", null, e.kind.replace(/_/g, " ")),
    e.device_id && names.get(e.device_id) ? ` · ${names.get(e.device_id)}` : "",
    ` · ${when(e.timestamp)} `,
    e.message ? h("span", { class: "hint" }, e.message) : null,
    " ",
    e.acknowledged_at ? h("span", { class: "badge ok" }, "acknowledged") : canWrite && e.id ? ack : null,
  );
}

/** @param {any} ctx @param {any} farm @param {any[]} rules @param {any[]} devices @param {Map<string,string>} names @param {boolean} canManage */
function rulesPanel(ctx, _farm, rules, devices, names, canManage) {
  const device = h("select", { name: "device" }, devices.map((d) => h("option", { value: d.id }, d.name)));
  const metric = h("input", { name: "metric", required: true, value: "temperature" });
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
      ? h("ul", null, rules.map((r) => h("li", null,
          `${r.name ? r.name + ": " : ""}${names.get(r.device_id) || "sensor"} ${r.metric}${r.above !== null ? ` above ${num(r.above, 2)}` : ""}${r.below !== null ? ` below ${num(r.below, 2)}` : ""} (hysteresis ${num(r.hysteresis, 2)}, for ${r.min_duration_s} s) · ${r.severity}${r.enabled ? "" : " · off"} `,
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
    canManage && devices.length ? form : null,
  );
}
