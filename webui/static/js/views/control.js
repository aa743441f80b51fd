// Control: fans (on, off, speed, auto), lights, pumps and valves with the device's own
// confirmation (pending, confirmed, failed) and the value it really applied; their daily
// schedules; the farm's climate targets and bands, auto or manual, and the climate history.

import { all, call, currentUser, get } from "../api.js";
import { field, h, mount, num, when } from "../dom.js";
import { optional } from "../farmdata.js";
import { messageOf, toast } from "../notify.js";

const CONTROL_ROLES = ["admin", "farm_manager", "operator"];
const MANAGE_ROLES = ["admin", "farm_manager"];

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const role = currentUser()?.role || "";
  const readOnly = ctx.service !== "agent" || !CONTROL_ROLES.includes(role);
  const [devices, climate, history] = await Promise.all([
    all("/api/v1/devices", "devices", { farm_id: farm.id }),
    optional(get("/api/v1/climate-control", { farm_id: farm.id }).then((c) => c.climate_controls), []),
    optional(get("/api/v1/climate-control/history", { farm_id: farm.id, limit: 20 }).then((c) => c.entries), []),
  ]);
  const actuators = devices.filter((d) => d.kind !== "sensor");
  const schedules = await Promise.all(actuators.map((d) => optional(get(`/api/v1/devices/${d.id}/schedule`), null)));
  mount(
    ctx.main,
    h("h1", null, "Control"),
    readOnly ? h("p", { class: "panel" }, ctx.service !== "agent" ? "Read-only here: devices are controlled from the farm's own app on the LAN." : "Your role can look but not control devices.") : null,
    h("h2", null, "Fans, lights, pumps and valves"),
    actuators.length
      ? h("div", { class: "cards" }, actuators.map((d, i) => actuatorCard(d, schedules[i], readOnly)))
      : h("p", { class: "panel" }, "No fans, lights, pumps or valves on this farm."),
    climatePanel(ctx, farm, devices, climate, readOnly || !MANAGE_ROLES.includes(role)),
    historyPanel(history),
  );
}

/** The line telling how the device answered a command. @param {any} command */
function outcomeText(command) {
  if (!command) return ["", ""];
  const asked = typeof command.value === "boolean" ? (command.value ? "on" : "off") : `${command.value}%`;
  const observed = command.observed || {};
  const applied = observed.fan_speed ?? observed.brightness;
  switch (command.outcome) {
    case "confirmed":
      return ["confirmed", applied !== undefined && applied !== command.value ? `Confirmed: asked ${asked}, the device runs at ${applied}%` : `Confirmed by the device (${asked})`];
    case "unconfirmed":
      return ["confirmed", `Sent (${asked}); this firmware does not report back`];
    case "timed_out":
      return ["failed", `Failed: no answer from the device (${command.detail || "timed out"})`];
    case "rejected":
      return ["failed", `Failed: the device refused (${command.detail || "rejected"})`];
    default:
      return ["failed", `Failed: ${command.detail || command.outcome}`];
  }
}

/** @param {any} device @param {any} schedule @param {boolean} readOnly */
function actuatorCard(device, schedule, readOnly) {
  const outcome = h("p", { class: "outcome", role: "status", "aria-live": "polite" });
  const stateLine = h("p", null, stateText(device));
  /** @param {() => Promise<any>} send */
  const run = async (send) => {
    outcome.className = "outcome pending";
    outcome.textContent = "Pending: waiting for the device to confirm…";
    try {
      const answer = await send();
      const command = answer.command || (answer.outcome ? answer : null);
      const [cls, text] = command
        ? outcomeText(command)
        : ["confirmed", answer.mode === "auto" ? "Back in auto: the climate loop and the schedule drive it" : "Done: nothing needed changing"];
      outcome.className = `outcome ${cls}`;
      outcome.textContent = text || "Done";
      if (answer.current_speed !== undefined) {
        device.state = { ...device.state, fan_speed: answer.current_speed, power: answer.status === "running" };
      } else if (command.observed) device.state = { ...device.state, ...command.observed };
      stateLine.textContent = stateText(device, answer);
    } catch (err) {
      outcome.className = "outcome failed";
      outcome.textContent = `Failed: ${messageOf(err)}`;
    }
  };
  const disabled = readOnly || device.status === "offline";
  /** @type {any[]} */
  let buttons = [];
  if (device.kind === "fan") {
    const fan = (/** @type {any} */ body) => run(() => call("PUT", `/api/v1/fans/${device.id}`, body));
    buttons = [
      h("div", { class: "actions" },
        h("button", { disabled, onclick: () => fan({ status: "running" }) }, "On"),
        h("button", { disabled, onclick: () => fan({ status: "stopped" }) }, "Off"),
        h("button", { disabled, onclick: () => fan({ status: "auto" }) }, "Auto"),
      ),
      h("div", { class: "speeds", role: "group", "aria-label": `${device.name} speed` },
        [25, 50, 60, 75, 100].map((s) => h("button", { disabled, onclick: () => fan({ status: "running", speed_percentage: s }) }, `${s}%`)),
      ),
    ];
  } else {
    const kind = device.kind === "valve" ? "valve" : "power";
    const command = (/** @type {any} */ value, k = kind) => run(() => call("POST", `/api/v1/devices/${device.id}/commands`, { kind: k, value }));
    buttons = [
      h("div", { class: "actions" },
        h("button", { disabled, onclick: () => command(true) }, device.kind === "valve" ? "Open" : "On"),
        h("button", { disabled, onclick: () => command(false) }, device.kind === "valve" ? "Close" : "Off"),
      ),
      device.kind === "light"
        ? h("div", { class: "speeds", role: "group", "aria-label": `${device.name} brightness` }, [25, 50, 75, 100].map((b) => h("button", { disabled, onclick: () => command(b, "brightness") }, `${b}%`)))
        : null,
    ];
  }
  return h(
    "article",
    { class: "card", "data-device": device.name },
    h("h3", null, device.name),
    h("p", { class: `status-${device.status}` }, `${device.kind} · ${device.status}`, device.location ? ` · ${device.location}` : ""),
    stateLine,
    buttons,
    outcome,
    scheduleForm(device, schedule, readOnly),
  );
}

/** @param {any} device @param {any} [fan] */
function stateText(device, fan) {
  const s = device.state || {};
  const parts = [];
  if (fan && fan.mode) parts.push(`mode ${fan.mode}`);
  if (s.power !== undefined) parts.push(s.power ? "on" : "off");
  if (s.fan_speed !== undefined) parts.push(`speed ${s.fan_speed}%`);
  if (s.brightness !== undefined) parts.push(`brightness ${s.brightness}%`);
  if (s.valve !== undefined) parts.push(s.valve ? "open" : "closed");
  return parts.length ? `Now: ${parts.join(", ")}` : "State not reported yet";
}

/** @param {any} device @param {any} schedule @param {boolean} readOnly */
function scheduleForm(device, schedule, readOnly) {
  if (!schedule) return null;
  const enabled = h("input", { type: "checkbox", checked: schedule.enabled, disabled: readOnly });
  const start = h("input", { type: "time", value: schedule.start_time || "06:00", disabled: readOnly, required: true });
  const end = h("input", { type: "time", value: schedule.end_time || "22:00", disabled: readOnly, required: true });
  const message = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { class: "schedule", "aria-label": `${device.name} daily schedule` },
    h("div", { class: "form-grid" }, field("Daily schedule on", enabled), field("From", start), field("Until", end)),
    message,
    readOnly ? null : h("button", { type: "submit" }, "Save schedule"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    message.textContent = "";
    try {
      const v = /** @param {any} x */ (x) => x.value;
      await call("PUT", `/api/v1/devices/${device.id}/schedule`, { enabled: /** @type {any} */ (enabled).checked, start_time: v(start), end_time: v(end) });
      toast(`Schedule of ${device.name} saved (${schedule.timezone})`);
    } catch (err) {
      message.textContent = messageOf(err);
    }
  });
  return h("details", null, h("summary", null, `Schedule: ${schedule.enabled ? `${schedule.start_time}–${schedule.end_time}` : "off"} · ${schedule.mode}`), form);
}

/** @param {any} ctx @param {any} farm @param {any[]} devices @param {any[]} climate @param {boolean} readOnly */
function climatePanel(ctx, farm, devices, climate, readOnly) {
  const current = climate.find((c) => !c.row_id);
  const settings = current ? current.settings : null;
  const live = current ? current.state : null;
  const fans = devices.filter((d) => d.kind === "fan");
  const input = (/** @type {string} */ name, /** @type {number} */ value, /** @type {number} */ step) => h("input", { type: "number", name, value, step, required: true, inputmode: "decimal" });
  const tTarget = input("temperature-target", settings ? settings.temperature.target : 22, 0.5);
  const tBand = input("temperature-band", settings ? settings.temperature.band : 2, 0.5);
  const hTarget = input("humidity-target", settings ? settings.humidity.target : 65, 1);
  const hBand = input("humidity-band", settings ? settings.humidity.band : 10, 1);
  const mode = h("select", { name: "mode" }, ["auto", "manual"].map((m) => h("option", { value: m, selected: settings ? settings.mode === m : m === "auto" }, m)));
  const message = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { class: "panel", "aria-labelledby": "climate-title" },
    h("h2", { id: "climate-title" }, "Climate of the farm"),
    live
      ? h("p", null, `Now: ${live.temperature ? num(live.temperature.value) + " °C" : "–"}, ${live.humidity ? num(live.humidity.value, 0) + " % RH" : "–"}; fans ${live.fan_speed === null ? "–" : live.fan_speed + "%"}${live.failsafe ? " · fail-safe (sensors silent)" : ""}${live.manual_hold ? " · manual hold" : ""}`)
      : null,
    settings ? null : h("p", null, "No climate settings yet: the fans run only by hand and by schedule."),
    h("div", { class: "form-grid" },
      field("Temperature target (°C)", tTarget), field("± band (°C)", tBand),
      field("Humidity target (%)", hTarget), field("± band (%)", hBand),
      field("Mode", mode)),
    message,
    readOnly || !fans.length ? null : h("button", { type: "submit", class: "primary" }, "Save climate targets"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const n = (/** @type {any} */ x) => Number(x.value);
    const body = {
      farm_id: farm.id,
      temperature: { target: n(tTarget), band: n(tBand) },
      humidity: { target: n(hTarget), band: n(hBand) },
      mode: /** @type {any} */ (mode).value,
      fan_ids: settings ? settings.fan_ids : fans.map((f) => f.id),
    };
    try {
      await call("POST", "/api/v1/climate-control/update", body);
      toast("Climate targets saved");
      ctx.reload();
    } catch (err) {
      message.textContent = messageOf(err);
    }
  });
  return form;
}

/** @param {any[]} history */
function historyPanel(history) {
  return h(
    "section",
    { class: "panel", "aria-labelledby": "history-title" },
    h("h2", { id: "history-title" }, "Climate history"),
    history.length
      ? h("ul", null, history.map((e) => h("li", null, h("strong", null, when(e.at)), ` · ${e.kind}${e.actor_email ? ` by ${e.actor_email}` : ""}: `, describe(e.data))))
      : h("p", null, "Nothing yet."),
  );
}

/** @param {Record<string, any>} data */
function describe(data) {
  return Object.entries(data)
    .filter(([, v]) => v !== null && typeof v !== "object")
    .map(([k, v]) => `${k.replace(/_/g, " ")} ${typeof v === "number" ? num(v, 1) : v}`)
    .join(", ");
}
