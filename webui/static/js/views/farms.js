// Every farm the caller may see (the cloud's first screen): open one to see its overview.
// Without any, an admin is shown how to pair a farm's agent, and can make its code here.

import { call, currentUser } from "../api.js";
import { field, h, mount, when } from "../dom.js";
import { showError } from "../notify.js";

/** @param {any} ctx */
export async function render(ctx) {
  mount(
    ctx.main,
    h("h1", null, "Farms"),
    ctx.farms.length
      ? h(
          "div",
          { class: "cards" },
          ctx.farms.map((/** @type {any} */ f) =>
            h(
              "article",
              { class: "card", "data-farm": f.name },
              h("h2", null, f.name),
              h("p", null, f.location || "–", " · ", h("span", { class: f.status === "active" ? "status-online" : "status-unknown" }, f.status)),
              h("p", null, `${f.metrics.total_rows} rows · ${f.metrics.total_racks} racks · ${f.metrics.total_shelves} shelves · ${f.metrics.active_plants} plants`),
              h("p", { class: "hint" }, `Updated ${when(f.updated_at)}`),
              h("button", { class: "primary", onclick: () => (ctx.selectFarm(f.id), (location.hash = "#/overview")) }, `Open ${f.name}`),
            ),
          ),
        )
      : currentUser()?.role === "admin" && ctx.service === "cloud"
        ? pairing()
        : h("p", { class: "panel" }, "No farm is shared with you yet. An administrator can give you access."),
  );
}

/** How an admin brings a farm in: a pairing code made here, the command to run on the farm. */
function pairing() {
  const name = /** @type {HTMLInputElement} */ (h("input", { name: "agent-name", required: true, maxlength: 200, value: "" }));
  const result = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    {
      onsubmit: async (/** @type {Event} */ e) => {
        e.preventDefault();
        try {
          const agent = await call("POST", "/api/v1/agents", { name: name.value.trim() });
          mount(
            result,
            h("p", null, `Pairing code for ${agent.name} (shown once, valid until ${new Date(agent.pairing_expires_at).toLocaleString()}):`),
            h("pre", { class: "command", "data-pairing-code": agent.pairing_code }, `farm-agent pair --cloud ${location.origin} --code ${agent.pairing_code}`),
            h("p", { class: "hint" }, "Run it on the farm as the agent's user, with --state-dir naming the state directory the agent runs on (the demo of a clone: .venv/bin/farm-agent pair --state-dir state-demo --cloud … --code …). Its farms appear here once its first batch has synced."),
          );
        } catch (err) {
          showError(err);
        }
      },
    },
    field("Name of the farm's agent", name, "For instance the site: Greenhouse One"),
    h("button", { class: "primary", type: "submit" }, "Make a pairing code"),
  );
  return h(
    "section",
    { class: "panel" },
    h("h2", null, "No farm yet: pair a farm's agent"),
    h("p", null, "Farms appear here once their agent is paired with this cloud and has synced. Make a one-time pairing code, then run the command it shows on the farm's agent."),
    form,
    result,
  );
}
