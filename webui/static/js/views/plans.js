// Grow plans: create one from the crop catalogue on chosen shelves; see each plan's progress (day,
// stage, days to harvest, climate adherence); start it, record the harvest, or end it.

import { all, call, currentUser, get } from "../api.js";
import { field, h, mount, num } from "../dom.js";
import { loadHierarchy, optional } from "../farmdata.js";
import { confirmDialog, messageOf, showError, toast } from "../notify.js";

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const canWrite = ctx.service === "agent" && ["admin", "farm_manager"].includes(currentUser()?.role || "");
  const [plans, rows] = await Promise.all([optional(all("/api/v1/grow-plans", "grow_plans", { farm_id: farm.id }), []), loadHierarchy(farm.id)]);
  const shelves = new Map(rows.flatMap((r) => r.racks.flatMap((rack) => rack.shelves.map((s) => [s.id, `${rack.name} · ${s.name}`]))));
  const current = plans.filter((p) => p.status === "active" || p.status === "planned");
  const past = plans.filter((p) => p.status === "harvested" || p.status === "cancelled");
  const progress = await Promise.all(current.map((p) => optional(get(`/api/v1/grow-plans/${p.id}/progress`), null)));
  const editor = h("div");
  mount(
    ctx.main,
    h("div", { class: "screen-title" }, h("h1", null, "Grow plans"), canWrite ? h("button", { class: "primary", onclick: () => create(ctx, editor, rows) }, "New grow plan") : null),
    editor,
    current.length
      ? h("div", { class: "cards" }, current.map((p, i) => planCard(ctx, p, progress[i], shelves, canWrite)))
      : h("p", { class: "panel" }, "No plan is growing or planned."),
    past.length
      ? h("section", { class: "panel" }, h("h2", null, "Finished"), h("ul", null, past.map((p) => h("li", null, `${p.species_name} · ${p.status} · ${p.start_date} → ${p.ended_at ? p.ended_at.slice(0, 10) : "–"} · ${p.plant_count} plants${p.notes ? " · " + p.notes : ""}`))))
      : null,
  );
}

/** @param {any} ctx @param {any} plan @param {any} progress @param {Map<string,string>} shelves @param {boolean} canWrite */
function planCard(ctx, plan, progress, shelves, canWrite) {
  /** @param {string} status @param {string} [notes] */
  const move = async (status, notes) => {
    try {
      await call("PUT", `/api/v1/grow-plans/${plan.id}`, notes === undefined ? { status } : { status, notes });
      toast(`${plan.species_name}: ${status}`);
      ctx.reload();
    } catch (err) {
      showError(err);
    }
  };
  const stage = progress && progress.current_stage_index !== null ? progress.stages[progress.current_stage_index] : null;
  const adherence = stage && stage.adherence
    ? ["temperature", "humidity"].map((m) => {
        const a = stage.adherence[m];
        return a.in_band === null ? `${m}: no data` : `${m} in band ${num(a.in_band * 100, 0)}% of the time`;
      }).join(" · ")
    : null;
  const harvestNotes = h("input", { name: "harvest", placeholder: "e.g. 4.2 kg, grade A", maxlength: 500 });
  return h(
    "article",
    { class: "card", "data-plan": plan.species_name },
    h("h2", null, plan.species_name, " ", h("span", { class: `badge ${plan.status === "active" ? "ok" : "warn"}` }, plan.status)),
    h("p", null, `${plan.plant_count} plants on ${plan.shelves.map((/** @type {any} */ s) => shelves.get(s.shelf_id) || "a shelf").join(", ")}`),
    progress
      ? [
          h("p", null, progress.day ? `Day ${progress.day} of ${progress.total_days}` : `Starts ${plan.start_date}`, progress.current_stage ? ` · ${progress.current_stage} (stage day ${progress.stage_day})` : "", ` · ${progress.days_to_harvest} days to harvest (${progress.expected_harvest_date})`),
          h("div", { class: "progress", role: "progressbar", "aria-label": `${plan.species_name} progress`, "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": Math.round(progress.percent) }, progressFill(progress.percent)),
          adherence ? h("p", { class: "hint" }, adherence) : null,
          progress.harvest_ready ? h("p", { class: "badge ok" }, "Ready to harvest") : null,
        ]
      : null,
    canWrite
      ? h("div", { class: "actions" },
          plan.status === "planned" ? h("button", { class: "primary", onclick: () => move("active") }, "Start now") : null,
          plan.status === "active" ? [field("Harvest notes", harvestNotes), h("button", { class: "primary", onclick: () => move("harvested", /** @type {any} */ (harvestNotes).value || plan.notes) }, "Record harvest")] : null,
          h("button", { class: "danger", onclick: async () => (await confirmDialog(`End the ${plan.species_name} plan?`, "It is marked cancelled; its history stays.", "End plan")) && move("cancelled") }, "End plan"),
        )
      : null,
  );
}

/** @param {number} percent */
function progressFill(percent) {
  const bar = h("div");
  bar.style.width = `${Math.max(0, Math.min(100, percent))}%`;
  return bar;
}

/** @param {any} ctx @param {HTMLElement} editor @param {any[]} rows */
async function create(ctx, editor, rows) {
  let crops;
  try {
    crops = (await get("/api/v1/crops", { limit: 500 })).crops;
  } catch (err) {
    return showError(err);
  }
  const crop = h("select", { name: "crop", required: true }, crops.map((/** @type {any} */ c) => h("option", { value: c.key }, `${c.name} (${c.total_days} days)`)));
  const plants = h("input", { name: "plants", type: "number", min: 1, required: true, value: 24 });
  const start = h("input", { name: "start", type: "date", value: new Date().toISOString().slice(0, 10) });
  const status = h("select", { name: "status" }, [h("option", { value: "active" }, "Growing from the start date"), h("option", { value: "planned" }, "Planned (start later by hand)")]);
  const shelfBoxes = rows.flatMap((row) => row.racks.flatMap((rack) => rack.shelves.map((s) => {
    const box = h("input", { type: "checkbox", name: "shelf", value: s.id, id: `shelf-${s.id}` });
    return h("label", { class: "check", for: `shelf-${s.id}` }, box, ` ${rack.name} · ${s.name}${s.current_species ? ` (${s.current_species})` : ""}`);
  })));
  const error = h("p", { class: "form-error", role: "alert" });
  const stages = h("p", { class: "hint" });
  const showStages = () => {
    const c = crops.find((/** @type {any} */ x) => x.key === /** @type {any} */ (crop).value);
    stages.textContent = c ? c.stages.map((/** @type {any} */ s) => `${s.name} ${s.days} d (${s.temperature.target}±${s.temperature.band} °C)`).join(" → ") : "";
  };
  crop.addEventListener("change", showStages);
  showStages();
  const form = h(
    "form",
    { class: "panel", "aria-label": "New grow plan" },
    h("h2", null, "New grow plan"),
    h("div", { class: "form-grid" }, field("Crop", crop), field("Plants", plants), field("Start date", start), field("Status", status)),
    stages,
    h("fieldset", { class: "shelves" }, h("legend", null, "Shelves"), shelfBoxes),
    error,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Create plan"), h("button", { type: "button", onclick: () => mount(editor) }, "Cancel")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const shelfIds = [...form.querySelectorAll('input[name="shelf"]:checked')].map((x) => /** @type {HTMLInputElement} */ (x).value);
    if (!shelfIds.length) {
      error.textContent = "Choose at least one shelf.";
      return;
    }
    try {
      await call("POST", "/api/v1/grow-plans", {
        farm_id: ctx.farm.id,
        species: /** @type {any} */ (crop).value,
        shelf_ids: shelfIds,
        plant_count: Number(/** @type {any} */ (plants).value),
        start_date: /** @type {any} */ (start).value || null,
        status: /** @type {any} */ (status).value,
      });
      toast("Grow plan created");
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  mount(editor, form);
  crop.focus();
}
