// Admin: users and their roles, per-farm permissions, API keys (shown once), the cloud link's
// state, and, when configured, the Home Assistant hub's devices and (in the cloud) the POS
// integration's status. Only admins see the user and key sections; the API refuses others anyway.

import { ApiError, all, call, currentUser, get } from "../api.js";
import { field, h, mount, when } from "../dom.js";
import { optional } from "../farmdata.js";
import { confirmDialog, messageOf, showError, toast } from "../notify.js";

const ROLES = ["admin", "farm_manager", "operator", "analyst", "user"];

/** @param {any} ctx */
export async function render(ctx) {
  const [link, hub, pos] = await Promise.all([linkPanel(ctx), hubPanel(), ctx.service === "cloud" ? posPanel() : null]);
  if (currentUser()?.role !== "admin") {
    mount(ctx.main, h("h1", null, "Admin"), link, hub, pos, h("p", { class: "panel" }, "Users, permissions and API keys are managed by administrators."));
    return;
  }
  const [users, permissions, keys] = await Promise.all([
    all("/api/v1/users/", "users"),
    optional(all("/api/v1/permissions/", "permissions"), []),
    all("/api/v1/api-keys", "api_keys"),
  ]);
  const farms = new Map(ctx.farms.map((/** @type {any} */ f) => [f.id, f.name]));
  const emails = new Map(users.map((u) => [u.id, u.email]));
  const secret = h("div", { "aria-live": "polite" });
  mount(
    ctx.main,
    h("h1", null, "Admin"),
    link,
    hub,
    pos,
    usersPanel(ctx, users),
    permissionsPanel(ctx, users, permissions, farms, emails),
    keysPanel(ctx, users, keys, emails, secret),
  );
}

/** @param {any} ctx */
async function linkPanel(ctx) {
  if (ctx.service !== "agent") return h("section", { class: "panel" }, h("h2", null, "Cloud"), h("p", null, "This is the cloud: farms appear here as their agents sync."));
  const [health, items] = await Promise.all([get("/healthz").catch(() => null), get("/supabase-items").catch(() => null)]);
  const sync = health && health.sync ? health.sync : null;
  return h(
    "section",
    { class: "panel", "aria-labelledby": "link-title" },
    h("h2", { id: "link-title" }, "Cloud link"),
    h("p", null, `Pairing: ${health ? health.checks.cloud.replace(/_/g, " ") : "unknown"}`),
    items && health && health.checks.cloud !== "not_paired"
      ? h("p", null, `Link ${items.status}; ${items.items_count} records waiting; last sync ${when(items.last_sync)}`)
      : null,
    sync ? h("pre", null, JSON.stringify(sync, null, 2)) : null,
    health ? h("p", { class: "hint" }, `Agent ${health.version}, up ${Math.round(health.uptime / 3600)} h, MQTT ${health.checks.mqtt}, database ${health.checks.database}`) : null,
  );
}

/** An integration that is not set up here: the endpoint answers 503 (disabled) or 404 (absent). */
function notConfigured(/** @type {unknown} */ err) {
  return err instanceof ApiError && (err.status === 503 || err.status === 404);
}

/** @param {string} id @param {string} title @param {...any} body */
function panel(id, title, ...body) {
  return h("section", { class: "panel", "aria-labelledby": id, "data-panel": id }, h("h2", { id }, title), ...body);
}

/** The Home Assistant hub: its state and its devices, or a clear "not configured". */
async function hubPanel() {
  const title = "Home Assistant hub";
  let status;
  try {
    status = await get("/api/v1/home-automation/status");
  } catch (err) {
    if (notConfigured(err)) return panel("hub-title", title, h("p", { "data-state": "not-configured" }, "Not configured on this server."));
    return panel("hub-title", title, h("p", { class: "form-error" }, messageOf(err)));
  }
  if (!status.enabled || !status.configured) return panel("hub-title", title, h("p", { "data-state": "not-configured" }, "Not configured on this server."));
  const summary = h(
    "p",
    { "data-state": status.reachable ? "reachable" : "unreachable" },
    status.reachable ? `Connected${status.hub_version ? `, Home Assistant ${status.hub_version}` : ""}${status.latency_ms !== null ? `, ${Math.round(status.latency_ms)} ms` : ""}${status.proxy_in_use ? ", through the access proxy" : ""}.` : `Not reachable${status.last_error ? ` (${status.last_error})` : ""}.`,
  );
  let devices = null;
  try {
    devices = (await get("/api/v1/home-automation/devices")).devices;
  } catch (err) {
    return panel("hub-title", title, summary, h("p", { class: "form-error" }, messageOf(err)));
  }
  return panel(
    "hub-title",
    title,
    summary,
    devices.length
      ? h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Hub devices" }, h("table", null,
          h("thead", null, h("tr", null, ["Device", "Kind", "State", "Area", "Changed"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", null, devices.map((/** @type {any} */ d) => h("tr", { "data-entity": d.entity_id }, h("td", null, d.name, h("br"), h("small", null, d.entity_id)), h("td", null, d.domain), h("td", null, d.state), h("td", null, d.area || "–"), h("td", null, when(d.last_changed))))),
        ))
      : h("p", null, "The hub reports no devices."),
  );
}

/** The POS integration (cloud): each configuration and the state of its last sync. */
async function posPanel() {
  const title = "Point of sale";
  let configs;
  try {
    configs = (await get("/api/v1/pos/configs", { limit: 50 })).configs;
  } catch (err) {
    if (notConfigured(err)) return panel("pos-title", title, h("p", { "data-state": "not-configured" }, "Not configured on this server."));
    if (err instanceof ApiError && err.status === 403) return panel("pos-title", title, h("p", null, "Your role cannot see the POS configurations."));
    return panel("pos-title", title, h("p", { class: "form-error" }, messageOf(err)));
  }
  if (!configs.length) return panel("pos-title", title, h("p", { "data-state": "not-configured" }, "No POS configuration yet."));
  const statuses = await Promise.all(configs.map((/** @type {any} */ c) => get(`/api/v1/pos/sync/status/${c.id}`).catch(() => null)));
  return panel(
    "pos-title",
    title,
    h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "POS configurations" }, h("table", null,
      h("thead", null, h("tr", null, ["Configuration", "Environment", "Active", "Last sync", "Last pulled"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", null, configs.map((/** @type {any} */ c, /** @type {number} */ i) => {
        const status = statuses[i];
        const job = status && status.jobs.length ? status.jobs[0] : null;
        const pulled = status ? Object.values(status.last_synced_at).sort().pop() : null;
        return h("tr", { "data-config": c.name },
          h("td", null, c.name, c.merchant_id ? h("small", null, ` ${c.merchant_id}`) : null),
          h("td", null, c.environment),
          h("td", null, c.is_active ? "yes" : "no"),
          h("td", { "data-job": job ? job.state : "none" }, job ? `${job.kind} ${job.state}${job.error ? `: ${job.error}` : ""} (${job.records} records)` : "never"),
          h("td", null, pulled ? when(/** @type {string} */ (pulled)) : "–"));
      })),
    )),
  );
}

/** @param {any} ctx @param {any[]} users */
function usersPanel(ctx, users) {
  const email = h("input", { type: "email", name: "email", required: true, autocomplete: "off" });
  const password = h("input", { type: "password", name: "password", required: true, minlength: 8, autocomplete: "new-password" });
  const role = h("select", { name: "role" }, ROLES.map((r) => h("option", { value: r, selected: r === "operator" }, r)));
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h("form", { "aria-label": "New user" }, h("h3", null, "New user"), h("div", { class: "form-grid" }, field("Email", email), field("Password", password, "At least 8 characters"), field("Role", role)), error, h("button", { type: "submit", class: "primary" }, "Create user"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = (/** @type {any} */ x) => x.value;
    try {
      await call("POST", "/api/v1/users/", { email: v(email), password: v(password), role: v(role) });
      toast(`${v(email)} created`);
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": "users-title" },
    h("h2", { id: "users-title" }, "Users"),
    h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Scrollable table" }, h("table", null,
      h("thead", null, h("tr", null, ["Email", "Role", "Status", "MFA", "Last sign-in", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", null, users.map((u) => {
        const select = h("select", { "aria-label": `Role of ${u.email}` }, ROLES.map((r) => h("option", { value: r, selected: r === u.role }, r)));
        select.addEventListener("change", async () => {
          try {
            await call("PUT", `/api/v1/users/${u.id}`, { role: /** @type {any} */ (select).value });
            toast(`${u.email} is now ${/** @type {any} */ (select).value}`);
          } catch (err) {
            showError(err);
            /** @type {any} */ (select).value = u.role;
          }
        });
        return h("tr", null, h("td", null, u.email), h("td", null, select), h("td", null, u.status), h("td", null, u.mfa_enabled ? "on" : "off"), h("td", null, when(u.last_login)),
          h("td", null, u.id === currentUser()?.id ? null : h("button", { class: "danger", "aria-label": `Delete ${u.email}`, onclick: async () => {
            if (!(await confirmDialog(`Delete ${u.email}?`, "Their sessions and API keys stop working at once.", "Delete"))) return;
            try {
              await call("DELETE", `/api/v1/users/${u.id}`);
              ctx.reload();
            } catch (err) {
              showError(err);
            }
          } }, "Delete")));
      })))),
    form,
  );
}

/** @param {any} ctx @param {any[]} users @param {any[]} permissions @param {Map<string,string>} farms @param {Map<string,string>} emails */
function permissionsPanel(ctx, users, permissions, farms, emails) {
  const user = h("select", { name: "user" }, users.filter((u) => u.role !== "admin").map((u) => h("option", { value: u.id }, u.email)));
  const farm = h("select", { name: "farm" }, ctx.farms.map((/** @type {any} */ f) => h("option", { value: f.id }, f.name)));
  const type = h("select", { name: "type" }, ["read_write", "read_only"].map((t) => h("option", { value: t }, t.replace("_", " "))));
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h("form", { "aria-label": "Grant a farm" }, h("h3", null, "Grant a farm"), h("div", { class: "form-grid" }, field("User", user), field("Farm", farm), field("Access", type)), error, h("button", { type: "submit", class: "primary" }, "Grant"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = (/** @type {any} */ x) => x.value;
    try {
      await call("POST", "/api/v1/permissions/", { user_id: v(user), farm_id: v(farm), permission_type: v(type) });
      toast("Access granted");
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": "perm-title" },
    h("h2", { id: "perm-title" }, "Farm permissions"),
    permissions.length
      ? h("ul", null, permissions.map((p) => h("li", null, `${emails.get(p.user_id) || p.user_id}: ${p.permission_type.replace("_", " ")} on ${farms.get(p.farm_id) || "a farm"} `,
          h("button", { class: "danger", "aria-label": `Revoke ${emails.get(p.user_id)} on ${farms.get(p.farm_id)}`, onclick: async () => {
            try {
              await call("DELETE", `/api/v1/permissions/${p.id}`);
              ctx.reload();
            } catch (err) {
              showError(err);
            }
          } }, "Revoke"))))
      : h("p", null, "No grants: only admins and farm creators see farms."),
    form,
  );
}

/** @param {any} ctx @param {any[]} users @param {any[]} keys @param {Map<string,string>} emails @param {HTMLElement} secret */
function keysPanel(ctx, users, keys, emails, secret) {
  const user = h("select", { name: "user" }, users.map((u) => h("option", { value: u.id }, u.email)));
  const name = h("input", { name: "name", required: true, maxlength: 100 });
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h("form", { "aria-label": "New API key" }, h("h3", null, "New API key"), h("div", { class: "form-grid" }, field("Acts as", user), field("Name", name)), error, h("button", { type: "submit", class: "primary" }, "Create key"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const created = await call("POST", "/api/v1/api-keys", { user_id: /** @type {any} */ (user).value, name: /** @type {any} */ (name).value });
      mount(secret, h("div", { class: "panel" }, h("p", null, h("strong", null, "Copy this key now; it is not shown again:")), h("p", null, h("code", null, created.key)), h("p", { class: "hint" }, "Send it as the X-API-Key header.")));
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  return h(
    "section",
    { class: "panel", "aria-labelledby": "keys-title" },
    h("h2", { id: "keys-title" }, "API keys"),
    secret,
    keys.length
      ? h("ul", null, keys.map((k) => h("li", null, `${k.name} (${k.prefix}…) for ${emails.get(k.user_id) || k.user_id}, used ${when(k.last_used_at)} `,
          h("button", { class: "danger", "aria-label": `Revoke key ${k.name}`, onclick: async () => {
            if (!(await confirmDialog(`Revoke ${k.name}?`, "Clients using it are refused at once.", "Revoke"))) return;
            try {
              await call("DELETE", `/api/v1/api-keys/${k.id}`);
              ctx.reload();
            } catch (err) {
              showError(err);
            }
          } }, "Revoke"))))
      : h("p", null, "No API keys."),
    form,
  );
}
