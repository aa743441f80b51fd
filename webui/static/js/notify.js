// Messages for people: toasts, and the text of a failed call (always the API's own message).

import { ApiError } from "./api.js";
import { h } from "./dom.js";

const toasts = /** @type {HTMLElement} */ (document.getElementById("toasts"));

/** Show a short message; errors stay until dismissed. @param {string} text @param {"ok"|"error"} [kind] */
export function toast(text, kind = "ok") {
  const close = h("button", { class: "toast-close", "aria-label": "Dismiss" }, "×");
  const el = h("div", { class: `toast ${kind}` }, h("span", null, text), close);
  close.addEventListener("click", () => el.remove());
  toasts.appendChild(el);
  if (kind === "ok") setTimeout(() => el.remove(), 4000);
}

/** The message a person should read for a failed call. @param {any} err */
export function messageOf(err) {
  if (err instanceof ApiError) {
    if (err.code === "RATE_LIMITED" && err.retryAfter) {
      return `${err.message} Try again in ${waitText(err.retryAfter)}.`;
    }
    const issues = err.details && err.details.errors;
    if (Array.isArray(issues) && issues.length) {
      return `${err.message}: ${issues.map((i) => `${i.field} ${i.issue}`).join("; ")}`;
    }
    return err.message;
  }
  return String(err && err.message ? err.message : err);
}

/** @param {number} seconds */
export function waitText(seconds) {
  return seconds >= 90 ? `${Math.ceil(seconds / 60)} minutes` : `${seconds} seconds`;
}

/** Toast a failure. @param {any} err */
export function showError(err) {
  toast(messageOf(err), "error");
}


/**
 * Ask before something that cannot be undone; resolves true when confirmed.
 * @param {string} title @param {string} text @param {string} action label of the confirm button
 */
export function confirmDialog(title, text, action) {
  return new Promise((resolve) => {
    const dialog = /** @type {HTMLDialogElement} */ (
      h(
        "dialog",
        { "aria-labelledby": "confirm-title" },
        h("h2", { id: "confirm-title" }, title),
        h("p", null, text),
        h(
          "div",
          { class: "actions" },
          h("button", { class: "danger primary", onclick: () => done(true) }, action),
          h("button", { onclick: () => done(false) }, "Cancel"),
        ),
      )
    );
    /** @param {boolean} ok */
    const done = (ok) => {
      dialog.close();
      dialog.remove();
      resolve(ok);
    };
    dialog.addEventListener("cancel", () => done(false));
    document.body.appendChild(dialog);
    dialog.showModal();
  });
}
