// Devices: the farm's devices in pages, searchable and filtered by kind, state and location,
// sorted by any column, with online state, last seen and profile; add one from a firmware
// profile (its topic or serial port, placed on a shelf) or from what the network announced
// (Found), edit, delete after a confirmation.

import { call, currentUser, get } from "../api.js";
import { field, h, mount, when } from "../dom.js";
import { loadPlaces } from "../farmdata.js";
import { confirmDialog, messageOf, showError, toast } from "../notify.js";
import { foundSection } from "./found.js";

const KINDS = ["sensor", "fan", "light", "pump", "valve"];
const STATES = ["online", "offline", "maintenance", "disabled"];
const PAGE_SIZES = [25, 50, 100, 200];
/** Columns a phone leaves out (the kind is in the filter, the rest one tap away). */
const OPTIONAL = new Set(["Kind", "Last seen", "Profile"]);
/** Columns a click sorts by (the API's sort names). */
const SORTS = { Name: "name", Kind: "kind", Where: "location", State: "status", "Last seen": "-last_seen" };
/** Typing in the search box asks the server after this pause. */
const TYPING_MS = 300;

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const canManage = ctx.service === "agent" && ["admin", "farm_manager"].includes(currentUser()?.role || "");
  const places = await loadPlaces(farm.id).catch(() => []);
  const p = ctx.params || {};
  const filter = {
    q: p.q || "",
    kind: KINDS.includes(p.kind) ? p.kind : "",
    status: STATES.includes(p.status) ? p.status : "",
    location: p.location || "",
    sort: Object.values(SORTS).includes(p.sort) || p.sort === "-name" ? p.sort : "name",
    limit: PAGE_SIZES.includes(Number(p.limit)) ? Number(p.limit) : 50,
    offset: Math.max(0, Number(p.offset) || 0),
  };
  const editor = h("div");
  const tbody = h("tbody");
  const found = h("p", { class: "hint", role: "status", "aria-live": "polite" });
  const pager = h("div", { class: "pager" });
  const headers = h("tr");
  const table = h(
    "div",
    { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Devices table" },
    h("table", { class: "compact" }, h("caption", { class: "sr-only" }, "Devices of " + farm.name), h("thead", null, headers), tbody),
  );

  let seq = 0;
  /** @param {boolean} [initial] a failure of the first page is the screen's (it shows the error) */
  const load = async (initial = false) => {
    const mine = ++seq;
    const query = { farm_id: farm.id, ...filter };
    let page;
    try {
      page = await get("/api/v1/devices", query);
    } catch (err) {
      if (initial) throw err;
      if (mine === seq) found.textContent = messageOf(err);
      return;
    }
    if (mine !== seq || !ctx.isCurrent()) return;
    const shown = Object.fromEntries(Object.entries(filter).filter(([k, v]) => v !== "" && !(k === "offset" && v === 0) && !(k === "limit" && v === 50) && !(k === "sort" && v === "name")));
    history.replaceState(null, "", `#/devices${Object.keys(shown).length ? "?" + new URLSearchParams(/** @type {any} */ (shown)) : ""}`);
    mount(tbody, page.devices.map((/** @type {any} */ d) => deviceRow(ctx, editor, d, places, canManage)));
    const first = page.total ? filter.offset + 1 : 0;
    const last = filter.offset + page.devices.length;
    found.textContent = page.total ? `${first}–${last} of ${page.total} device${page.total === 1 ? "" : "s"}` : "No device matches.";
    mount(
      pager,
      h("button", { type: "button", disabled: filter.offset === 0, onclick: () => go(Math.max(0, filter.offset - filter.limit)) }, "Previous"),
      h("button", { type: "button", disabled: last >= page.total, onclick: () => go(filter.offset + filter.limit) }, "Next"),
      field("Per page", h("select", { name: "limit", onchange: (/** @type {Event} */ e) => { filter.limit = Number(/** @type {HTMLSelectElement} */ (e.target).value); go(0); } }, PAGE_SIZES.map((n) => h("option", { value: n, selected: n === filter.limit }, String(n))))),
    );
    drawHeaders();
  };
  const go = (/** @type {number} */ offset) => {
    filter.offset = offset;
    void load();
  };
  const drawHeaders = () => {
    mount(headers, [...Object.keys(SORTS), "Profile", canManage ? "Actions" : null].filter(Boolean).map((t) => {
      const key = /** @type {Record<string,string>} */ (SORTS)[/** @type {string} */ (t)];
      const opt = OPTIONAL.has(/** @type {string} */ (t)) ? "opt" : null;
      if (!key) return h("th", { scope: "col", class: opt }, t);
      const active = filter.sort === key || (key === "name" && filter.sort === "-name");
      const next = key === "name" && filter.sort === "name" ? "-name" : key;
      return h("th", { scope: "col", class: opt, "aria-sort": active ? (filter.sort.startsWith("-") ? "descending" : "ascending") : null },
        h("button", { type: "button", class: "sort", onclick: () => { filter.sort = next; go(0); } }, t));
    }));
  };

  let typing = 0;
  const search = h("input", { type: "search", name: "q", value: filter.q, placeholder: "Name, place or type", autocomplete: "off" });
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = window.setTimeout(() => {
      filter.q = /** @type {HTMLInputElement} */ (search).value.trim();
      go(0);
    }, TYPING_MS);
  });
  const choose = (/** @type {string} */ name, /** @type {string[]} */ values, /** @type {string} */ all) => {
    const select = h("select", { name }, h("option", { value: "" }, all), values.map((v) => h("option", { value: v, selected: /** @type {any} */ (filter)[name] === v }, v)));
    select.addEventListener("change", () => {
      /** @type {any} */ (filter)[name] = /** @type {HTMLSelectElement} */ (select).value;
      go(0);
    });
    return select;
  };
  const tools = h(
    "form",
    { class: "list-tools", role: "search", "aria-label": "Find devices", onsubmit: (/** @type {Event} */ e) => e.preventDefault() },
    h("div", { class: "field search" }, h("label", { for: "device-search" }, "Search"), Object.assign(search, { id: "device-search" })),
    field("Kind", choose("kind", KINDS, "All kinds")),
    field("State", choose("status", STATES, "All states")),
    field("Where", choose("location", places, "Anywhere")),
  );
  mount(
    ctx.main,
    h("div", { class: "screen-title" }, h("h1", null, "Devices"), canManage ? h("button", { class: "primary", onclick: () => add(ctx, editor, places) }, "Add a device") : null),
    editor,
    canManage ? foundSection(ctx, places) : null,
    tools,
    found,
    table,
    pager,
  );
  drawHeaders();
  await load(true);
}

/** One compact row of the list. @param {any} ctx @param {HTMLElement} editor @param {any} d @param {string[]} places @param {boolean} canManage */
function deviceRow(ctx, editor, d, places, canManage) {
  return h(
    "tr",
    { "data-device": d.name },
    h("td", null, d.kind === "sensor" ? h("a", { href: `#/sensors/${d.id}` }, d.name) : d.name),
    h("td", { class: "opt" }, d.device_type || d.kind),
    h("td", null, d.location || "–"),
    h("td", { class: `status-${d.status}` }, d.admin_status !== "active" ? `${d.status} (${d.admin_status})` : d.status),
    h("td", { class: "opt" }, when(d.last_seen)),
    h("td", { class: "opt" }, d.profile || "–"),
    canManage
      ? h(
          "td",
          null,
          h("div", { class: "actions" },
            h("button", { onclick: () => edit(ctx, editor, d, places), "aria-label": `Edit ${d.name}` }, "Edit"),
            h("button", { class: "danger", "aria-label": `Delete ${d.name}`, onclick: () => remove(ctx, d) }, "Delete"),
          ),
        )
      : null,
  );
}

/** @param {any} ctx @param {any} device */
async function remove(ctx, device) {
  const ok = await confirmDialog(`Delete ${device.name}?`, "Its calibration history goes with it. Readings already stored stay.", "Delete");
  if (!ok) return;
  try {
    await call("DELETE", `/api/v1/devices/${device.id}`);
    toast(`${device.name} deleted`);
    ctx.reload();
  } catch (err) {
    showError(err);
  }
}

/** A location input with the farm's rows, racks and shelves offered. @param {string[]} places @param {string} value */
function placeInput(places, value) {
  const list = h("datalist", { id: "places" }, places.map((p) => h("option", { value: p })));
  return [h("input", { name: "location", list: "places", value, maxlength: 200 }), list];
}

/** @param {any} ctx @param {HTMLElement} editor @param {any} device @param {string[]} places */
function edit(ctx, editor, device, places) {
  const name = h("input", { name: "name", value: device.name, required: true, maxlength: 200 });
  const [location, list] = placeInput(places, device.location);
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { class: "panel", "aria-label": `Edit ${device.name}` },
    h("h2", null, `Edit ${device.name}`),
    h("div", { class: "form-grid" }, field("Name", name), field("Where (shelf, rack or row)", location), list),
    error,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Save"), h("button", { type: "button", onclick: () => mount(editor) }, "Cancel")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await call("PUT", `/api/v1/devices/${device.id}`, { name: /** @type {any} */ (name).value, location: /** @type {any} */ (location).value });
      toast("Saved");
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  mount(editor, form);
  name.focus();
}

/**
 * A registration address from the form: a topic, a serial port, or a Modbus bus and unit id.
 * @param {string} transport @param {string} where @param {number} unit
 */
function addressOf(transport, where, unit) {
  if (transport === "serial") return { transport: "serial", port: where };
  if (transport !== "modbus") return { transport: "mqtt", topic_base: where };
  if (where.startsWith("/")) return { transport: "modbus", port: where, unit };
  const [host, port] = where.split(/:(?=\d+$)/);
  return port ? { transport: "modbus", host, tcp_port: Number(port), unit } : { transport: "modbus", host, unit };
}

/** @param {any} ctx @param {HTMLElement} editor @param {string[]} places */
async function add(ctx, editor, places) {
  let profiles;
  try {
    profiles = (await get("/api/v1/device-profiles")).profiles;
  } catch (err) {
    return showError(err);
  }
  const profile = h("select", { name: "profile", required: true }, profiles.map((/** @type {any} */ p) => h("option", { value: p.id }, `${p.name} (${p.kind}, ${p.transport})`)));
  const name = h("input", { name: "name", required: true, maxlength: 200 });
  const address = h("input", { name: "address", required: true });
  const [location, list] = placeInput(places, "");
  const addressField = field("MQTT topic", address);
  const unit = h("input", { name: "unit", type: "number", min: 1, max: 247, value: 1, inputmode: "numeric" });
  const unitField = field("Modbus unit id (1-247)", unit);
  const usedAs = h("select", { name: "kind" }, ["pump", "valve", "light"].map((k) => h("option", { value: k }, k)));
  const usedAsField = field("The relay switches a", usedAs);
  const error = h("p", { class: "form-error", role: "alert" });
  const sync = () => {
    const p = profiles.find((/** @type {any} */ x) => x.id === /** @type {any} */ (profile).value);
    const label = /** @type {HTMLElement} */ (addressField.querySelector("label"));
    label.textContent =
      p.transport === "serial"
        ? "Serial port (e.g. /dev/ttyUSB0)"
        : p.transport === "modbus"
          ? "Bus (port or host:port)"
          : "MQTT topic (e.g. tasmota_A1B2C3)";
    usedAsField.hidden = p.kind !== "relay";
    unitField.hidden = p.transport !== "modbus";
  };
  profile.addEventListener("change", sync);
  const form = h(
    "form",
    { class: "panel", "aria-label": "Add a device" },
    h("h2", null, "Add a device"),
    h("div", { class: "form-grid" }, field("Firmware profile", profile), field("Name", name), usedAsField, addressField, unitField, field("Where (shelf, rack or row)", location), list),
    error,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Add"), h("button", { type: "button", onclick: () => mount(editor) }, "Cancel")),
  );
  sync();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const p = profiles.find((/** @type {any} */ x) => x.id === /** @type {any} */ (profile).value);
    const where = /** @type {any} */ (address).value.trim();
    const body = {
      name: /** @type {any} */ (name).value,
      farm_id: ctx.farm.id,
      kind: p.kind === "relay" ? /** @type {any} */ (usedAs).value : p.kind,
      profile: p.id,
      location: /** @type {any} */ (location).value,
      address: addressOf(p.transport, where, Number(/** @type {any} */ (unit).value)),
    };
    try {
      await call("POST", "/api/v1/devices", body);
      toast(`${body.name} added`);
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  mount(editor, form);
  profile.focus();
}
