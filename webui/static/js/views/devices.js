// Devices: the farm's devices with online state, last seen and profile; add one from a firmware
// profile (its topic or serial port, placed on a shelf), edit, delete after a confirmation.

import { all, call, currentUser, get } from "../api.js";
import { field, h, mount, when } from "../dom.js";
import { loadHierarchy } from "../farmdata.js";
import { confirmDialog, messageOf, showError, toast } from "../notify.js";

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const [devices, rows] = await Promise.all([all("/api/v1/devices", "devices", { farm_id: farm.id }), loadHierarchy(farm.id)]);
  const canManage = ctx.service === "agent" && ["admin", "farm_manager"].includes(currentUser()?.role || "");
  const places = rows.flatMap((row) => [row.name, ...row.racks.flatMap((rack) => [rack.name, ...rack.shelves.map((s) => s.name)])]);
  const editor = h("div");
  const table = h(
    "div",
    { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Scrollable table" },
    h(
      "table",
      null,
      h("caption", { class: "sr-only" }, "Devices of " + farm.name),
      h("thead", null, h("tr", null, ["Name", "Kind", "Where", "State", "Last seen", "Profile", canManage ? "Actions" : null].filter(Boolean).map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        null,
        devices.map((d) =>
          h(
            "tr",
            { "data-device": d.name },
            h("td", null, d.kind === "sensor" ? h("a", { href: `#/sensors/${d.id}` }, d.name) : d.name),
            h("td", null, d.device_type || d.kind),
            h("td", null, d.location || "–"),
            h("td", { class: `status-${d.status}` }, d.admin_status !== "active" ? `${d.status} (${d.admin_status})` : d.status),
            h("td", null, when(d.last_seen)),
            h("td", null, d.profile || "–"),
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
          ),
        ),
      ),
    ),
  );
  mount(
    ctx.main,
    h("div", { class: "screen-title" }, h("h1", null, "Devices"), canManage ? h("button", { class: "primary", onclick: () => add(ctx, editor, places) }, "Add a device") : null),
    editor,
    devices.length ? table : h("p", { class: "panel" }, "No devices on this farm yet."),
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
  const usedAs = h("select", { name: "kind" }, ["pump", "valve", "light"].map((k) => h("option", { value: k }, k)));
  const usedAsField = field("The relay switches a", usedAs);
  const error = h("p", { class: "form-error", role: "alert" });
  const sync = () => {
    const p = profiles.find((/** @type {any} */ x) => x.id === /** @type {any} */ (profile).value);
    const label = /** @type {HTMLElement} */ (addressField.querySelector("label"));
    label.textContent = p.transport === "serial" ? "Serial port (e.g. /dev/ttyUSB0)" : "MQTT topic (e.g. tasmota_A1B2C3)";
    usedAsField.hidden = p.kind !== "relay";
  };
  profile.addEventListener("change", sync);
  const form = h(
    "form",
    { class: "panel", "aria-label": "Add a device" },
    h("h2", null, "Add a device"),
    h("div", { class: "form-grid" }, field("Firmware profile", profile), field("Name", name), usedAsField, addressField, field("Where (shelf, rack or row)", location), list),
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
      address: p.transport === "serial" ? { transport: "serial", port: where } : { transport: "mqtt", topic_base: where },
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
