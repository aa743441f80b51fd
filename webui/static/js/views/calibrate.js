// Calibration wizard for technicians, built for gloves on a 10-inch tablet: pick a sensor and a
// plan, then for each point put the probe in place, watch the live raw value settle (stability
// bar), capture, next. On-device (EZO) runs use the agent's calibration session; agent-side fits
// are computed here from reference/raw pairs and previewed before they are saved.

import { all, call, get } from "../api.js";
import { field, h, mount, num, when } from "../dom.js";
import { metricLabel } from "../metrics.js";
import { messageOf, showError } from "../notify.js";
import { LiveStream } from "../streams.js";

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const sensors = (await all("/api/v1/sensors", "sensors", { farm_id: farm.id })).filter((s) => s.calibration);
  const chosen = sensors.find((s) => s.id === ctx.params.sensor);
  if (chosen) return plan(ctx, chosen);
  mount(
    ctx.main,
    h("div", { class: "wizard" },
      h("h1", null, "Calibrate a sensor"),
      sensors.length
        ? h("div", { class: "cards" }, sensors.map((s) =>
            h("button", { class: "big sensor-pick", onclick: () => (location.hash = `#/calibrate?sensor=${s.id}`) },
              `${s.name} · ${s.calibration.metrics.map(metricLabel).join(", ")} · ${s.status}`)))
        : h("p", { class: "panel" }, "No sensor on this farm can be calibrated.")),
  );
}

/** Point plans the sensor's procedure allows. @param {any} cal */
function plans(cal) {
  const names = cal.points;
  if (names.includes("mid")) {
    return [["mid"], ["mid", "low"], ["mid", "low", "high"]].filter((p) => p.length >= cal.min_points && p.length <= cal.max_points);
  }
  if (names.includes("dry")) return [["dry", "single"], ["dry", "low", "high"]];
  const out = [];
  for (let n = Math.max(1, cal.min_points); n <= Math.min(3, cal.max_points); n++) out.push(Array.from({ length: n }, (_, i) => `point ${i + 1}`));
  return out;
}

/** @param {any} ctx @param {any} sensor */
function plan(ctx, sensor) {
  const cal = sensor.calibration;
  const steps = h("ol", { class: "steps", "aria-label": "Steps" }, ["Sensor", "Plan", "Points", "Result"].map((s, i) => h("li", { "aria-current": i === 1 ? "step" : null, class: i < 1 ? "done" : "" }, s)));
  mount(
    ctx.main,
    h("div", { class: "wizard" },
      h("h1", null, `Calibrate ${sensor.name}`),
      steps,
      h("p", null, cal.instructions),
      h("p", { class: "hint" }, `Now: ${cal.active.length ? cal.active.map((/** @type {any} */ a) => `${metricLabel(a.metric)} ${a.method} ${when(a.performed_at)}`).join("; ") : "not calibrated"}`),
      h("h2", null, "How many points?"),
      h("div", { class: "actions" }, plans(cal).map((p) =>
        h("button", { class: "big primary", onclick: () => (cal.performed_by === "device" ? onDevice(ctx, sensor, p) : inAgent(ctx, sensor, p.length)) },
          `${p.length}-point (${p.join(", ")})`))),
      h("p", null, h("a", { href: "#/calibrate" }, "Choose another sensor")),
    ),
  );
}

/** The stability bar and figure. @param {any} live */
function stabilityView(live) {
  if (!live || live.spread === null) return h("div", null, h("div", { class: "stability", role: "img", "aria-label": "Settling: not enough readings yet" }, barFill(10)), h("p", null, "Settling…"));
  const ratio = live.tolerance / Math.max(live.spread, 1e-9);
  const pct = Math.max(5, Math.min(100, ratio * 100));
  return h(
    "div",
    null,
    h("div", { class: `stability${live.stable ? " stable" : ""}`, role: "img", "aria-label": live.stable ? "Stable" : "Still moving" }, barFill(pct)),
    h("p", { class: "stability-text" }, live.stable ? "Stable — ready to capture" : "Still moving — wait", ` (last ${live.samples} readings within ${num(live.spread, 3)}, needed ${num(live.tolerance, 3)})`),
  );
}

/** @param {number} pct */
function barFill(pct) {
  const bar = h("div");
  bar.style.width = `${pct}%`;
  return bar;
}

/** On-device calibration through /calibration-session. @param {any} ctx @param {any} sensor @param {string[]} points */
async function onDevice(ctx, sensor, points) {
  const base = `/api/v1/sensors/${sensor.id}/calibration-session`;
  const box = h("div", { class: "wizard", "aria-live": "polite" });
  mount(ctx.main, box);
  let session;
  try {
    session = await call("POST", base, { points: points.map((p) => ({ point: p })) });
  } catch (err) {
    if (err.status !== 409) return mount(box, h("div", { class: "panel error", role: "alert" }, messageOf(err)), h("a", { href: "#/calibrate", class: "button" }, "Back"));
    session = await get(base); // a session is already open for this sensor: carry on with it
  }
  let timer = 0;
  let busy = false;
  const stop = () => clearInterval(timer);
  // The live part (value, stability) updates in place; the rest is drawn again only when the
  // step changes, so focus and a screen reader's place survive the once-a-second refresh.
  const liveValue = h("p", { class: "big-value", "aria-label": "Live raw value" }, "…");
  const liveError = h("p", { class: "form-error" });
  const liveStability = h("div");
  const captureButton = h("button", { class: "big primary", onclick: () => capture() }, "Capture point");
  let drawnStep = -1;
  const drawLive = () => {
    const live = session.live;
    liveValue.textContent = live && live.value !== null ? `${num(live.value, 3)} ${live.unit}` : "…";
    liveError.textContent = live && live.error ? `Reading failed: ${live.error}` : "";
    mount(liveStability, stabilityView(live));
    captureButton.toggleAttribute("disabled", busy);
    captureButton.textContent = busy ? "Taking the point…" : "Capture point";
  };
  const draw = () => {
    if (session.state === "succeeded") {
      stop();
      return result(ctx, box, sensor, session.calibration);
    }
    const step = session.next_step;
    const number = step ? step.number : 0;
    if (number === drawnStep) return drawLive();
    drawnStep = number;
    mount(
      box,
      h("h1", null, `Calibrate ${sensor.name}`),
      h("ol", { class: "steps", "aria-label": "Points" }, session.points.map((/** @type {any} */ p, /** @type {number} */ i) =>
        h("li", { class: i < session.completed_steps ? "done" : "", "aria-current": step && step.number === i + 1 ? "step" : null }, `${p.point} ${p.value ?? ""}`))),
      step
        ? [
            h("h2", { tabindex: -1, class: "step-title" }, `Point ${step.number} of ${session.points.length}: ${step.point}`),
            h("p", { class: "instructions" }, step.instructions),
            liveValue,
            liveError,
            liveStability,
            h("div", { class: "actions" }, captureButton, h("button", { class: "big danger", onclick: cancel }, "Cancel")),
          ]
        : h("p", null, "The device is taking the point…"),
    );
    drawLive();
    const title = box.querySelector(".step-title");
    if (title && number > 1) /** @type {HTMLElement} */ (title).focus();
  };
  const capture = async () => {
    busy = true;
    drawLive();
    try {
      session = await call("POST", `${base}/next`);
    } catch (err) {
      stop();
      return mount(box, h("div", { class: "panel error", role: "alert" }, h("h2", null, "Calibration failed"), h("p", null, messageOf(err)), h("p", null, "The previous calibration stays in force.")), h("a", { class: "button big", href: `#/calibrate?sensor=${sensor.id}` }, "Start again"));
    } finally {
      busy = false;
    }
    draw();
  };
  const cancel = async () => {
    stop();
    try {
      await call("DELETE", base);
    } catch (err) {
      showError(err);
    }
    location.hash = "#/calibrate";
  };
  timer = window.setInterval(async () => {
    if (busy || !ctx.isCurrent()) return ctx.isCurrent() ? undefined : stop();
    try {
      session = await get(base);
      draw();
    } catch (err) {
      if (err.status === 404) stop();
    }
  }, 1500);
  draw();
}

/** The stored result: fit and its quality, then the corrected live value. @param {any} ctx @param {HTMLElement} box @param {any} sensor @param {any} calibration */
function result(ctx, box, sensor, calibration) {
  const response = calibration.device_response;
  const slope = response && response.slope;
  const corrected = h("p", { class: "big-value", "aria-label": "Corrected value" }, "…");
  mount(
    box,
    h("h1", null, `${sensor.name} calibrated`),
    h("p", { class: `badge ${calibration.outcome === "succeeded" ? "ok" : "bad"}` }, calibration.outcome),
    h("p", null, calibration.message),
    slope ? h("p", null, `Probe slope: acid ${num(slope.acid_percent, 1)} %, base ${num(slope.base_percent, 1)} %${slope.offset_mv !== null ? `, offset ${num(slope.offset_mv, 1)} mV` : ""} (100 % is ideal; below 85 % replace the probe)`) : null,
    calibration.slope !== null ? h("p", null, `Fit: value = ${num(calibration.slope, 4)} × raw + ${num(calibration.offset, 4)}`) : null,
    response && response.warnings.length ? h("ul", { class: "form-error" }, response.warnings.map((/** @type {string} */ w) => h("li", null, w))) : null,
    h("h2", null, "Corrected reading now"),
    corrected,
    h("div", { class: "actions" }, h("a", { class: "button big primary", href: `#/sensors/${sensor.id}` }, "See history"), h("a", { class: "button big", href: "#/calibrate" }, "Calibrate another")),
  );
  new LiveStream("sensor-data", ctx.farm.id, (msg) => {
    if (msg.type === "reading" && msg.data.device_id === sensor.id && msg.data.metric === calibration.metric) {
      corrected.textContent = `${num(msg.data.value, 2)} ${msg.data.unit}`;
    }
  }, { deviceIds: [sensor.id] });
}

/** Least-squares line through (raw, reference) pairs; an offset for one point. @param {{raw: number, reference: number}[]} pts */
function fit(pts) {
  if (pts.length === 1) return { slope: 1, offset: pts[0].reference - pts[0].raw, worst: 0 };
  const n = pts.length;
  const mx = pts.reduce((a, p) => a + p.raw, 0) / n;
  const my = pts.reduce((a, p) => a + p.reference, 0) / n;
  const sxx = pts.reduce((a, p) => a + (p.raw - mx) ** 2, 0);
  const slope = sxx ? pts.reduce((a, p) => a + (p.raw - mx) * (p.reference - my), 0) / sxx : 1;
  const offset = my - slope * mx;
  const worst = Math.max(...pts.map((p) => Math.abs(slope * p.raw + offset - p.reference)));
  return { slope, offset, worst };
}

/** Agent-side calibration: reference/raw pairs from the live stream, then POST /calibrate. @param {any} ctx @param {any} sensor @param {number} count */
function inAgent(ctx, sensor, count) {
  const metric = sensor.calibration.metrics[0];
  const unit = (sensor.metrics.find((/** @type {any} */ m) => m.name === metric) || {}).unit || "";
  /** @type {{raw: number, reference: number}[]} */
  const captured = [];
  /** @type {number[]} */
  const recent = [];
  const box = h("div", { class: "wizard", "aria-live": "polite" });
  const value = h("p", { class: "big-value", "aria-label": "Live raw value" }, "…");
  const stability = h("div");
  const reference = h("input", { type: "number", step: "any", inputmode: "decimal", required: true });
  const error = h("p", { class: "form-error", role: "alert" });
  const drawLive = () => {
    const last = recent[recent.length - 1];
    value.textContent = last === undefined ? "waiting for a reading…" : `${num(last, 3)} ${unit}`;
    const window = recent.slice(-3);
    const spread = window.length === 3 ? Math.max(...window) - Math.min(...window) : null;
    const tolerance = Math.max(0.05, Math.abs(last || 0) * 0.005);
    mount(stability, stabilityView(spread === null ? null : { spread, tolerance, stable: spread <= tolerance, samples: 3 }));
  };
  const draw = () => {
    if (captured.length === count) return preview();
    mount(
      box,
      h("h1", null, `Calibrate ${sensor.name}: ${metricLabel(metric)}`),
      h("h2", null, `Point ${captured.length + 1} of ${count}`),
      h("p", { class: "instructions" }, "Put the sensor next to a trusted reference, wait for the value to settle, enter the reference value and capture."),
      value,
      stability,
      field(`Reference value (${unit})`, reference),
      error,
      h("div", { class: "actions" }, h("button", { class: "big primary", onclick: capture }, "Capture point"), h("a", { class: "button big", href: "#/calibrate" }, "Cancel")),
    );
    drawLive();
  };
  const capture = () => {
    const ref = Number(/** @type {any} */ (reference).value);
    const raw = recent[recent.length - 1];
    if (/** @type {any} */ (reference).value === "" || Number.isNaN(ref)) return void (error.textContent = "Enter the reference value first.");
    if (raw === undefined) return void (error.textContent = "No reading from the sensor yet.");
    captured.push({ raw, reference: ref });
    /** @type {any} */ (reference).value = "";
    error.textContent = "";
    draw();
  };
  const preview = () => {
    const f = fit(captured);
    const save = async () => {
      try {
        const calibration = await call("POST", `/api/v1/sensors/${sensor.id}/calibrate`, { metric, points: captured.map((p) => ({ reference: p.reference, raw: p.raw })) });
        result(ctx, box, sensor, calibration);
      } catch (err) {
        error.textContent = messageOf(err);
      }
    };
    mount(
      box,
      h("h1", null, `Check the fit for ${sensor.name}`),
      h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Scrollable table" }, h("table", null, h("thead", null, h("tr", null, ["Reference", "Raw", "Corrected", "Error"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", null, captured.map((p) => h("tr", null, h("td", null, num(p.reference, 3)), h("td", null, num(p.raw, 3)), h("td", null, num(f.slope * p.raw + f.offset, 3)), h("td", null, num(f.slope * p.raw + f.offset - p.reference, 3))))))),
      h("p", null, `value = ${num(f.slope, 4)} × raw + ${num(f.offset, 4)}; largest error ${num(f.worst, 3)} ${unit}`),
      Math.abs(f.slope - 1) > 0.3 ? h("p", { class: "form-error" }, "The slope is far from 1: check the references before saving.") : null,
      error,
      h("div", { class: "actions" }, h("button", { class: "big primary", onclick: save }, "Save calibration"), h("a", { class: "button big", href: `#/calibrate?sensor=${sensor.id}` }, "Start again")),
    );
  };
  mount(ctx.main, box);
  draw();
  new LiveStream("sensor-data", ctx.farm.id, (msg) => {
    if (msg.type !== "reading" || msg.data.device_id !== sensor.id || msg.data.metric !== metric) return;
    recent.push(msg.data.raw ?? msg.data.value);
    if (recent.length > 10) recent.shift();
    if (captured.length < count) drawLive();
  }, { deviceIds: [sensor.id] });
}
