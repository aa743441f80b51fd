// Every farm the caller may see (the cloud's first screen): open one to see its overview.

import { h, mount, when } from "../dom.js";

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
      : h("p", { class: "panel" }, "No farm is shared with you yet. An administrator can give you access."),
  );
}
