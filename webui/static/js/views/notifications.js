// Notifications to people: the farm's contact points (an Apprise URL or mailto:, never shown
// back; the person each reaches; a test button that shows what the service answered; quiet
// hours), the rules that send events to them (kinds, severities, delay for devices offline,
// repeat, escalation), and the history (sent, failed, waiting, acknowledged by whom) with
// Acknowledge. In the cloud the screen shows the history of what the cloud sent (a farm silent
// or back, messages its agent handed over); contact points and rules are the agent's.

import { ApiError, all, call, currentUser, get } from "../api.js";
import { field, h, mount, when } from "../dom.js";
import { confirmDialog, messageOf, showError, toast } from "../notify.js";

const KINDS = [
  ["alert_raised", "Alert raised"],
  ["device_offline", "Device offline"],
  ["device_fault", "Device fault"],
  ["command_failed", "Command failed"],
  ["sync_stuck", "Cloud sync stuck"],
  ["disk_low", "Low disk"],
  ["disk_full", "Disk full"],
  ["database_salvaged", "Database salvaged"],
  ["backup_failed", "Backup failed"],
  ["harvest_ready", "Harvest ready"],
  ["contact_point_failing", "Contact point failing"],
  ["webhook_disabled", "Webhook disabled"],
];
const SEVERITIES = ["info", "warning", "error", "critical"];
const HISTORY_PAGE = 50;

/** @param {any} ctx */
export async function render(ctx) {
  const farm = ctx.farm;
  if (!farm) return mount(ctx.main, h("p", { class: "panel" }, "No farm to show."));
  const role = currentUser()?.role || "";
  const manager = ctx.service === "agent" && ["admin", "farm_manager"].includes(role);
  const canAck = ctx.service === "agent" && ["admin", "farm_manager", "operator"].includes(role);
  /** @type {any[]|null} */
  let contacts = null;
  /** @type {any[]|null} */
  let rules = null;
  /** @type {Map<string, string>} */
  let people = new Map();
  if (manager) {
    try {
      [contacts, rules, people] = await Promise.all([
        get("/api/v1/contact-points", { farm_id: farm.id, limit: 500 }).then((r) => r.contact_points),
        get("/api/v1/notification-rules", { farm_id: farm.id, limit: 500 }).then((r) => r.notification_rules),
        farmPeople(farm.id),
      ]);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 403) throw err;
    }
  }
  const history = new History(farm.id, canAck, ctx.service === "cloud");
  await history.load();
  if (!ctx.isCurrent()) return;
  mount(
    ctx.main,
    h("h1", null, "Notifications"),
    contacts && rules
      ? [contactsPanel(ctx, contacts, people), rulesPanel(ctx, rules, contacts)]
      : h(
          "p",
          { class: "panel" },
          ctx.service === "cloud"
            ? "What the cloud sent: a farm gone silent and back, and messages its agent could not deliver. Contact points and rules are managed on the farm's own app."
            : "Contact points and rules are managed by administrators and farm managers on the farm's own app.",
        ),
    history.el,
  );
}

/**
 * The people a contact point may reach, as the viewer may see them (id -> email): for an
 * administrator every active user who may see the farm (administrators see every farm); for a
 * farm manager, who may not list users, themselves.
 * @param {string} farmId
 */
async function farmPeople(farmId) {
  /** @type {Map<string, string>} */
  const people = new Map();
  const me = currentUser();
  if (me?.role === "admin") {
    const users = await all("/api/v1/users/", "users");
    for (const u of users) {
      if (u.status === "active" && (u.role === "admin" || u.farms_access.includes(farmId))) people.set(u.id, u.email);
    }
  }
  if (me) people.set(me.id, me.email);
  return people;
}

/** @param {Map<string, string>} people @param {string|null} owner */
function ownerName(people, owner) {
  if (!owner) return "–";
  return people.get(owner) || "another user";
}

/** @param {Map<string, string>} people @param {string|null} selected @param {Record<string, any>} attrs */
function ownerSelect(people, selected, attrs) {
  const options = [...people].sort((a, b) => a[1].localeCompare(b[1]));
  if (selected && !people.has(selected)) options.unshift([selected, "another user"]);
  return h("select", attrs, options.map(([id, email]) => h("option", { value: id, selected: id === selected }, email)));
}

/** @param {string} id @param {string} title @param {...any} body */
function panel(id, title, ...body) {
  return h("section", { class: "panel", "aria-labelledby": id, "data-panel": id }, h("h2", { id }, title), ...body);
}

/** @param {any} c */
function health(c) {
  if (!c.enabled) return "disabled";
  if (c.failing_since) return `failing since ${when(c.failing_since)}${c.last_error ? `: ${c.last_error}` : ""}`;
  return c.last_success_at ? `ok, last sent ${when(c.last_success_at)}` : "ok";
}

/** @param {any} ctx @param {any[]} contacts @param {Map<string, string>} people */
function contactsPanel(ctx, contacts, people) {
  const answer = h("p", { class: "hint", "aria-live": "polite", "data-test-answer": "" });
  const rows = contacts.map((c) => {
    const test = h("button", { type: "button" }, "Test");
    test.addEventListener("click", async () => {
      test.setAttribute("disabled", "");
      answer.textContent = `Sending a test message to ${c.name}…`;
      try {
        const result = await call("POST", `/api/v1/contact-points/${c.id}/test`);
        answer.textContent = `${c.name}: ${result.ok ? "sent" : "not sent"} — ${result.answer}`;
        answer.dataset.ok = String(result.ok);
        toast(result.ok ? `Test sent to ${c.name}` : `Test to ${c.name} failed`, result.ok ? "ok" : "error");
      } catch (err) {
        answer.textContent = messageOf(err);
      } finally {
        test.removeAttribute("disabled");
      }
    });
    const remove = h("button", { type: "button", class: "danger" }, "Delete");
    remove.addEventListener("click", async () => {
      if (!(await confirmDialog("Delete contact point", `Stop notifying ${c.name}? Its history goes with it.`, "Delete"))) return;
      try {
        await call("DELETE", `/api/v1/contact-points/${c.id}`);
        toast(`${c.name} deleted`);
        ctx.reload();
      } catch (err) {
        showError(err);
      }
    });
    const owner = ownerSelect(people, c.owner_id, { name: "owner_id", "aria-label": `Owner of ${c.name}` });
    owner.addEventListener("change", async () => {
      const chosen = /** @type {HTMLSelectElement} */ (owner).value;
      try {
        await call("PUT", `/api/v1/contact-points/${c.id}`, {
          name: c.name,
          owner_id: chosen,
          quiet_start: c.quiet_start,
          quiet_end: c.quiet_end,
          enabled: c.enabled,
        });
        c.owner_id = chosen;
        toast(`${c.name} now reaches ${ownerName(people, chosen)}`);
      } catch (err) {
        /** @type {HTMLSelectElement} */ (owner).value = c.owner_id || "";
        showError(err);
      }
    });
    return h(
      "tr",
      { "data-contact": c.name },
      h("td", null, c.name),
      h("td", { "data-owner": ownerName(people, c.owner_id) }, owner),
      h("td", null, c.service),
      h("td", null, c.quiet_start ? `${c.quiet_start}–${c.quiet_end}` : "none"),
      h("td", { "data-health": c.failing_since ? "failing" : "ok" }, health(c)),
      h("td", null, h("div", { class: "actions" }, test, remove)),
    );
  });
  const name = h("input", { name: "name", required: true, maxlength: 100, autocomplete: "off" });
  const url = h("input", { name: "url", type: "password", required: true, maxlength: 2000, autocomplete: "off", spellcheck: "false" });
  const quietStart = h("input", { name: "quiet_start", type: "time" });
  const quietEnd = h("input", { name: "quiet_end", type: "time" });
  const owner = ownerSelect(people, currentUser()?.id || null, { name: "owner_id" });
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { "aria-label": "New contact point" },
    h("h3", null, "New contact point"),
    h(
      "div",
      { class: "form-grid" },
      field("Name", name),
      field("Owner", owner, "The person it reaches: an Acknowledge button in a message acknowledges as them"),
      field("URL", url, "An Apprise URL (ntfy://…, tgram://…, pover://…, mailtos://…) or mailto:address for this farm's mail server. Kept secret."),
      field("Quiet from", quietStart, "Only critical messages between these times"),
      field("Quiet until", quietEnd),
    ),
    error,
    h("button", { type: "submit", class: "primary" }, "Add contact point"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = (/** @type {any} */ x) => x.value || null;
    try {
      await call("POST", "/api/v1/contact-points", {
        farm_id: ctx.farm.id,
        name: v(name),
        url: v(url),
        owner_id: v(owner),
        quiet_start: v(quietStart),
        quiet_end: v(quietEnd),
      });
      toast(`${v(name)} added`);
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  return panel(
    "contacts-title",
    "Contact points",
    contacts.length
      ? h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Contact points table" }, h("table", null,
          h("thead", null, h("tr", null, ["Name", "Owner", "Service", "Quiet hours", "State", ""].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", null, rows),
        ))
      : h("p", null, "No contact point yet: add the phone or mailbox of whoever should be told."),
    answer,
    form,
  );
}

/** @param {string} name @param {[string, string][]} options @param {string[]} checked */
function checks(name, options, checked) {
  return options.map(([value, label]) => {
    const id = `${name}-${value}`;
    return h("label", { class: "check", for: id }, h("input", { type: "checkbox", name, value, id, checked: checked.includes(value) }), ` ${label}`);
  });
}

/** @param {HTMLElement} form @param {string} name */
function checked(form, name) {
  return [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((x) => /** @type {HTMLInputElement} */ (x).value);
}

/** @param {any} ctx @param {any[]} rules @param {any[]} contacts */
function rulesPanel(ctx, rules, contacts) {
  const names = new Map(contacts.map((c) => [c.id, c.name]));
  const kindLabel = new Map(KINDS);
  const list = (/** @type {string[]} */ ids) => ids.map((id) => names.get(id) || "?").join(", ");
  const rows = rules.map((r) => {
    const remove = h("button", { type: "button", class: "danger" }, "Delete");
    remove.addEventListener("click", async () => {
      if (!(await confirmDialog("Delete rule", `Stop sending ${r.name || "these events"}?`, "Delete"))) return;
      try {
        await call("DELETE", `/api/v1/notification-rules/${r.id}`);
        toast("Rule deleted");
        ctx.reload();
      } catch (err) {
        showError(err);
      }
    });
    const when_ = [
      r.offline_after_min ? `offline ${r.offline_after_min} min` : null,
      r.repeat_every_min ? `repeat every ${r.repeat_every_min} min` : null,
      r.escalate_after_min ? `after ${r.escalate_after_min} min to ${list(r.escalate_to)}` : null,
    ].filter(Boolean);
    return h(
      "tr",
      { "data-rule": r.name },
      h("td", null, r.name || "–"),
      h("td", null, r.event_kinds.map((/** @type {string} */ k) => kindLabel.get(k) || k).join(", ")),
      h("td", null, r.severities.join(", ")),
      h("td", null, list(r.contact_point_ids)),
      h("td", null, when_.join("; ") || "once"),
      h("td", null, remove),
    );
  });
  if (!contacts.length) {
    return panel("rules-title", "Rules", h("p", null, "Add a contact point first; rules send events to contact points."));
  }
  const contactOptions = /** @type {[string, string][]} */ (contacts.map((c) => [c.id, c.name]));
  const name = h("input", { name: "name", maxlength: 100, autocomplete: "off" });
  const offline = h("input", { name: "offline_after_min", type: "number", min: 0, value: 5 });
  const repeat = h("input", { name: "repeat_every_min", type: "number", min: 1 });
  const escalate = h("input", { name: "escalate_after_min", type: "number", min: 1 });
  const error = h("p", { class: "form-error", role: "alert" });
  const form = h(
    "form",
    { "aria-label": "New rule" },
    h("h3", null, "New rule"),
    h("div", { class: "form-grid" }, field("Name", name)),
    h("fieldset", { class: "shelves" }, h("legend", null, "Events"), checks("kind", /** @type {[string, string][]} */ (KINDS), ["alert_raised", "device_offline"])),
    h("fieldset", { class: "shelves" }, h("legend", null, "Severities"), checks("severity", SEVERITIES.map((s) => [s, s]), ["warning", "error", "critical"])),
    h("fieldset", { class: "shelves" }, h("legend", null, "Tell"), checks("contact", contactOptions, contacts.length === 1 ? [contacts[0].id] : [])),
    h(
      "div",
      { class: "form-grid" },
      field("Device offline for (min)", offline, "A device back sooner is not reported"),
      field("Repeat every (min)", repeat, "While raised and not acknowledged; empty: once"),
      field("Escalate after (min)", escalate, "Empty: no escalation"),
    ),
    h("fieldset", { class: "shelves" }, h("legend", null, "Escalate to"), checks("escalate", contactOptions, [])),
    error,
    h("button", { type: "submit", class: "primary" }, "Add rule"),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const n = (/** @type {any} */ x) => (x.value === "" ? null : Number(x.value));
    try {
      await call("POST", "/api/v1/notification-rules", {
        farm_id: ctx.farm.id,
        name: /** @type {any} */ (name).value,
        event_kinds: checked(form, "kind"),
        severities: checked(form, "severity"),
        contact_point_ids: checked(form, "contact"),
        offline_after_min: n(offline) || 0,
        repeat_every_min: n(repeat),
        escalate_after_min: n(escalate),
        escalate_to: checked(form, "escalate"),
      });
      toast("Rule added");
      ctx.reload();
    } catch (err) {
      error.textContent = messageOf(err);
    }
  });
  return panel(
    "rules-title",
    "Rules",
    rules.length
      ? h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Rules table" }, h("table", null,
          h("thead", null, h("tr", null, ["Name", "Events", "Severities", "Tell", "When", ""].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", null, rows),
        ))
      : h("p", null, "No rule yet: nothing is sent to anyone."),
    form,
  );
}

class History {
  /** @param {string} farmId @param {boolean} canAck @param {boolean} cloud what the cloud sent (never acknowledged there) */
  constructor(farmId, canAck, cloud) {
    this.farmId = farmId;
    this.canAck = canAck;
    this.cloud = cloud;
    this.offset = 0;
    this.body = h("div");
    this.el = panel("history-title", "History", this.body);
  }

  async load() {
    const page = await get("/api/v1/notifications", { farm_id: this.farmId, limit: HISTORY_PAGE, offset: this.offset });
    this.show(page);
  }

  /** @param {any} page */
  show(page) {
    const items = page.notifications;
    if (!items.length) return mount(this.body, h("p", null, "Nothing sent yet."));
    const rows = items.map((/** @type {any} */ n) => {
      let ack = null;
      if (n.acknowledged_at) ack = `by ${n.acknowledged_by_email || n.acknowledged_by} ${when(n.acknowledged_at)}`;
      else if (n.event_id && this.canAck && n.step !== "test") {
        ack = h("button", { type: "button" }, "Acknowledge");
        ack.addEventListener("click", async () => {
          try {
            await call("POST", `/api/v1/notifications/${n.id}/acknowledge`);
            toast("Acknowledged: its repeats stop");
            await this.load();
          } catch (err) {
            showError(err);
          }
        });
      }
      const state =
        n.status === "pending" && n.next_attempt_at
          ? `waiting until ${new Date(n.next_attempt_at).toLocaleTimeString()}`
          : n.status === "handover"
            ? "handed to the cloud"
            : n.status;
      return h(
        "tr",
        { "data-status": n.status },
        h("td", null, when(n.sent_at || n.created_at)),
        h("td", null, n.farm_name || "–"),
        h("td", null, n.contact_point_name || "–"),
        h("td", null, n.message, n.step !== "first" ? h("small", null, ` (${n.step}${n.step === "repeat" ? ` ${n.round}` : ""})`) : null),
        h("td", { class: `severity-${n.severity}` }, n.severity),
        h("td", null, state, n.attempts > 1 ? h("small", null, ` after ${n.attempts} attempts`) : null, n.answer && n.status !== "sent" ? h("br") : null, n.answer && n.status !== "sent" ? h("small", null, n.answer) : null),
        this.cloud ? null : h("td", null, ack || "–"),
      );
    });
    const more = [];
    if (this.offset > 0) more.push(h("button", { type: "button", onclick: () => { this.offset = Math.max(0, this.offset - HISTORY_PAGE); void this.load(); } }, "Newer"));
    if (this.offset + items.length < page.total) more.push(h("button", { type: "button", onclick: () => { this.offset += HISTORY_PAGE; void this.load(); } }, "Older"));
    mount(
      this.body,
      h("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": "Notification history" }, h("table", null,
        h("thead", null, h("tr", null, ["When", "Farm", "To", "What", "Severity", "State", ...(this.cloud ? [] : ["Acknowledged"])].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", null, rows),
      )),
      more.length ? h("div", { class: "actions" }, more) : null,
    );
  }
}
