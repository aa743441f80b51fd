// The shell: sign-in gate, header with the farm switcher and navigation, hash routes, the
// connection banner and toasts. Each screen is a module in views/ exporting render(ctx).

import { all, currentUser, on, refresh, signOut } from "./api.js";
import { h, mount } from "./dom.js";
import { messageOf, showError } from "./notify.js";
import { closeAll, onLinkChange } from "./streams.js";
import { labelTables } from "./tables.js";

const service = document.querySelector('meta[name="farm-service"]')?.getAttribute("content") || "agent";
const main = /** @type {HTMLElement} */ (document.getElementById("main"));
const top = /** @type {HTMLElement} */ (document.getElementById("top"));
const banner = /** @type {HTMLElement} */ (document.getElementById("banner"));

/** Screens: hash path pattern, nav label (null: not in the nav), module. */
const ROUTES = [
  { path: "overview", label: "Overview", load: () => import("./views/overview.js") },
  { path: "farms", label: service === "cloud" ? "Farms" : null, load: () => import("./views/farms.js") },
  { path: "devices", label: "Devices", load: () => import("./views/devices.js") },
  { path: "control", label: "Control", load: () => import("./views/control.js") },
  { path: "sensors/:id", label: null, load: () => import("./views/sensor.js") },
  { path: "plans", label: "Grow plans", load: () => import("./views/plans.js") },
  { path: "alerts", label: "Alerts", load: () => import("./views/alerts.js") },
  { path: "notifications", label: "Notifications", load: () => import("./views/notifications.js") },
  { path: "calibrate", label: service === "agent" ? "Calibrate" : null, load: () => import("./views/calibrate.js") },
  { path: "admin", label: "Admin", load: () => import("./views/admin.js") },
];

/** @type {{farms: any[], farmId: string|null}} */
const state = { farms: [], farmId: localStorage.getItem("farm") };
let renderSeq = 0;
labelTables(main);
let linkDown = false;
let serverDown = false;

function updateBanner() {
  const down = linkDown || serverDown;
  banner.hidden = !down;
  banner.textContent = down ? "Connection lost — reconnecting… Live values may be out of date." : "";
  document.body.classList.toggle("offline", down);
}

onLinkChange((up) => {
  linkDown = !up;
  updateBanner();
});
on("connection", (up) => {
  serverDown = !up;
  updateBanner();
});
on("session", (user) => {
  if (user) return;
  state.farms = [];
  route();
});

/** The farm the screens show (the switcher's choice). */
function currentFarm() {
  return state.farms.find((f) => f.id === state.farmId) || state.farms[0] || null;
}

async function loadFarms() {
  state.farms = await all("/api/v1/farms/", "farms");
  const farm = currentFarm();
  state.farmId = farm ? farm.id : null;
}

function header() {
  const user = currentUser();
  const select = h(
    "select",
    {
      id: "farm-switcher",
      "aria-label": "Farm",
      onchange: (/** @type {Event} */ e) => {
        state.farmId = /** @type {HTMLSelectElement} */ (e.target).value;
        localStorage.setItem("farm", state.farmId);
        route();
      },
    },
    state.farms.map((f) => h("option", { value: f.id, selected: f.id === state.farmId }, f.name)),
  );
  const active = location.hash.replace(/^#\/?/, "").split(/[/?]/)[0] || (service === "cloud" ? "farms" : "overview");
  const screens = ROUTES.filter((r) => r.label);
  const nav = h(
    "nav",
    { id: "screens", "aria-label": "Screens" },
    screens.map((r) => h("a", { href: `#/${r.path}`, "aria-current": r.path === active ? "page" : null }, r.label)),
    h("a", { href: "/api/v1/docs" }, "API docs"),
  );
  // On a phone the screens are a menu (app.css): this button opens and closes it.
  const menu = h(
    "button",
    {
      class: "menu-toggle",
      "aria-expanded": "false",
      "aria-controls": "screens",
      onclick: () => {
        const open = nav.classList.toggle("open");
        menu.setAttribute("aria-expanded", String(open));
      },
    },
    "☰ ",
    screens.find((r) => r.path === active)?.label || "Menu",
  );
  mount(
    top,
    h(
      "div",
      { class: "bar" },
      menu,
      h("a", { class: "brand", href: "#/overview" }, h("img", { src: new URL("../icon.svg", import.meta.url).href, alt: "" }), service === "cloud" ? "Farm cloud" : "Farm"),
      state.farms.length > 1 ? select : h("span", { class: "farm-name" }, currentFarm()?.name || "No farm"),
      h(
        "div",
        { class: "user" },
        h("span", { class: "who" }, user ? `${user.email} (${user.role})` : ""),
        h("button", { class: "ghost", onclick: () => signOut().catch(showError) }, "Sign out"),
      ),
    ),
    nav,
  );
  top.hidden = false;
}

/** @param {string} hash */
function match(hash) {
  const [path, search] = hash.replace(/^#\/?/, "").split("?");
  const query = Object.fromEntries(new URLSearchParams(search || ""));
  const parts = path.split("/").filter(Boolean);
  if (!parts.length) parts.push(service === "cloud" ? "farms" : "overview");
  for (const r of ROUTES) {
    const pattern = r.path.split("/");
    if (pattern.length !== parts.length) continue;
    /** @type {Record<string,string>} */
    const params = { ...query };
    if (pattern.every((p, i) => (p.startsWith(":") ? ((params[p.slice(1)] = decodeURIComponent(parts[i])), true) : p === parts[i]))) {
      return { r, params };
    }
  }
  return null;
}

async function route() {
  const seq = ++renderSeq;
  closeAll();
  linkDown = false;
  updateBanner();
  if (!currentUser()) {
    let restored = false;
    try {
      restored = await refresh();
    } catch (err) {
      return mount(main, h("div", { class: "panel error" }, messageOf(err)));
    }
    if (!restored) {
      top.hidden = true;
      const view = await import("./views/signin.js");
      return view.render({ main, service, onSignedIn: () => route() });
    }
  }
  if (seq !== renderSeq) return;
  try {
    if (!state.farms.length) await loadFarms();
  } catch (err) {
    return mount(main, h("div", { class: "panel error", role: "alert" }, messageOf(err)));
  }
  const found = match(location.hash);
  header();
  if (!found) return mount(main, h("div", { class: "panel" }, "No such screen. ", h("a", { href: "#/overview" }, "Go to the overview")));
  mount(main, h("p", { class: "loading" }, "Loading…"));
  try {
    const view = await found.r.load();
    if (seq !== renderSeq) return;
    await view.render({
      main,
      params: found.params,
      farm: currentFarm(),
      farms: state.farms,
      service,
      isCurrent: () => seq === renderSeq,
      reload: () => route(),
      selectFarm: (/** @type {string} */ id) => {
        state.farmId = id;
        localStorage.setItem("farm", id);
      },
    });
  } catch (err) {
    if (seq !== renderSeq) return;
    mount(main, h("div", { class: "panel error", role: "alert" }, h("h2", null, "This screen could not load"), h("p", null, messageOf(err))));
  }
}

window.addEventListener("hashchange", () => route());
route();
