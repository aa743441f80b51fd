// Found: devices the agent heard announce themselves (Tasmota, ESPHome, zigbee2mqtt, Shelly)
// and not yet added, each with the proposed firmware profile, its address and the readings
// heard so far. "Add" registers one where the person places it (the same checks as adding a
// device by hand); "Ignore" hides it for good. The list refreshes on a short poll.

import { call, get } from "../api.js";
import { field, h, mount, when } from "../dom.js";
import { formatValue, metricLabel } from "../metrics.js";
import { messageOf, toast } from "../notify.js";

/** New announcements show up within this. */
const POLL_MS = 4000;
const RELAY_KINDS = ["light", "pump", "valve"];

/**
 * The Found section for the devices screen; polls while the screen is shown.
 * @param {any} ctx @param {string[]} places
 * @returns {HTMLElement}
 */
export function foundSection(ctx, places) {
  const cards = h("div", { class: "cards" });
  const status = h("p", { class: "found-status", role: "status", "aria-live": "polite" });
  const section = h("section", { class: "found", "aria-labelledby": "found-title", hidden: true },
    h("h2", { id: "found-title" }, "Found"),
    h("p", { class: "hint" }, "Devices on the network that are not added yet. Add one to place it on the farm."),
    status,
    cards,
  );
  /** The card whose Add form is open: a refresh leaves it alone. */
  let editing = "";
  /** @type {any[]} */
  let shown = [];
  const load = async () => {
    if (!ctx.isCurrent()) return;
    let page;
    try {
      page = await get("/api/v1/discovered-devices", { limit: 50 });
    } catch (err) {
      status.textContent = messageOf(err);
      return schedule();
    }
    status.textContent = page.total > page.discovered_devices.length ? `${page.discovered_devices.length} of ${page.total} shown` : "";
    shown = page.discovered_devices;
    section.hidden = shown.length === 0;
    const keep = editing ? cards.querySelector(`[data-found="${CSS.escape(editing)}"]`) : null;
    mount(cards, shown.map((/** @type {any} */ d) => (keep && d.id === editing ? keep : card(d))));
    schedule();
  };
  let timer = 0;
  const schedule = () => {
    clearTimeout(timer);
    if (ctx.isCurrent()) timer = window.setTimeout(load, POLL_MS);
  };

  /** @param {any} d */
  const card = (d) => {
    const form = h("div");
    const readings = Object.entries(d.readings || {});
    return h("article", { class: "card found-card", "data-found": d.id, "aria-label": `Found ${d.name}` },
      h("h3", null, d.name),
      h("p", { class: "hint" }, [d.model, `via ${d.source}`].filter(Boolean).join(" · ")),
      h("dl", { class: "found-facts" },
        h("dt", null, "Profile"), h("dd", null, d.profile || "none fits"),
        h("dt", null, "Address"), h("dd", null, d.address.transport === "serial" ? d.address.port : d.address.topic_base),
        h("dt", null, "Heard"), h("dd", null, when(d.last_seen)),
      ),
      readings.length
        ? h("div", { class: "chips" }, readings.map(([metric, value]) => h("span", { class: "chip", "data-metric": metric }, `${metricLabel(metric)} ${formatValue(metric, Number(value), d.units?.[metric])}`)))
        : h("p", { class: "hint" }, "No reading heard yet."),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", disabled: !d.profile, "aria-label": `Add ${d.name}`, onclick: () => openForm(d, form) }, "Add"),
        h("button", { type: "button", "aria-label": `Ignore ${d.name}`, onclick: () => ignore(d) }, "Ignore"),
      ),
      form,
    );
  };

  /** @param {any} d @param {HTMLElement} holder */
  const openForm = (d, holder) => {
    editing = d.id;
    const name = h("input", { name: "name", value: d.name, required: true, maxlength: 200 });
    const list = h("datalist", { id: `found-places-${d.id}` }, places.map((p) => h("option", { value: p })));
    const location = h("input", { name: "location", list: list.id, maxlength: 200 });
    const kind = RELAY_KINDS.includes(d.kind) && d.profile && !d.profile.includes("light")
      ? h("select", { name: "kind" }, RELAY_KINDS.map((k) => h("option", { value: k, selected: k === d.kind }, k)))
      : null;
    const error = h("p", { class: "form-error", role: "alert" });
    const form = h("form", { "aria-label": `Add ${d.name}` },
      h("div", { class: "form-grid" },
        field("Name", name),
        field("Where (shelf, rack or row)", location),
        list,
        kind ? field("It switches a", kind) : null,
      ),
      error,
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "primary" }, "Add to farm"),
        h("button", { type: "button", onclick: () => { editing = ""; mount(holder); } }, "Cancel"),
      ),
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const body = {
        farm_id: ctx.farm.id,
        name: /** @type {any} */ (name).value,
        location: /** @type {any} */ (location).value,
        ...(kind ? { kind: /** @type {any} */ (kind).value } : {}),
      };
      try {
        await call("POST", `/api/v1/discovered-devices/${d.id}/accept`, body);
        editing = "";
        toast(`${body.name} added`);
        ctx.reload();
      } catch (err) {
        error.textContent = messageOf(err);
      }
    });
    mount(holder, form);
    name.focus();
  };

  /** @param {any} d */
  const ignore = async (d) => {
    try {
      await call("POST", `/api/v1/discovered-devices/${d.id}/ignore`);
      toast(`${d.name} ignored`);
      if (editing === d.id) editing = "";
      void load();
    } catch (err) {
      status.textContent = messageOf(err);
    }
  };

  void load();
  return section;
}
