// Sign in, with the MFA step when the account has it. Messages name what went wrong: a wrong
// password, a lockout with its wait, an expired session.

import { ApiError, signIn, verifyMfa } from "../api.js";
import { field, h, mount } from "../dom.js";
import { messageOf } from "../notify.js";

/** @param {{main: HTMLElement, service: string, onSignedIn: () => void}} ctx */
export function render(ctx) {
  const notice = sessionStorage.getItem("signin-message");
  sessionStorage.removeItem("signin-message");
  const message = h("p", { class: "form-error", role: "alert", id: "signin-error" }, notice || "");
  const email = h("input", { type: "email", name: "email", autocomplete: "username", required: true, value: localStorage.getItem("last-email") || "" });
  const password = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
  const submit = h("button", { type: "submit", class: "primary big" }, "Sign in");
  const form = h(
    "form",
    { class: "signin panel", "aria-labelledby": "signin-title" },
    h("p", { class: "product" }, h("img", { src: new URL("../../icon.svg", import.meta.url).href, alt: "" }), "Vertical farm"),
    h("h1", { id: "signin-title" }, ctx.service === "cloud" ? "Sign in to the farm cloud" : "Sign in to this farm's agent"),
    message,
    field("Email", email),
    field("Password", password),
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.setAttribute("disabled", "");
    message.textContent = "";
    try {
      const emailValue = /** @type {HTMLInputElement} */ (email).value;
      const answer = await signIn(emailValue, /** @type {HTMLInputElement} */ (password).value);
      localStorage.setItem("last-email", emailValue);
      if (answer.mfa) return mfaStep(ctx, answer.challenge);
      ctx.onSignedIn();
    } catch (err) {
      message.textContent = signinMessage(err);
      submit.removeAttribute("disabled");
      /** @type {HTMLInputElement} */ (password).select();
    }
  });
  mount(ctx.main, h("div", { class: "center" }, form));
  (notice || !(/** @type {HTMLInputElement} */ (email).value) ? email : password).focus();
}

/** @param {any} err */
function signinMessage(err) {
  if (err instanceof ApiError && err.code === "INVALID_CREDENTIALS") {
    return "Wrong email or password.";
  }
  if (err instanceof ApiError && err.code === "RATE_LIMITED") {
    return `Too many failed attempts: sign-in is locked. ${messageOf(err)}`;
  }
  return messageOf(err);
}

/** @param {{main: HTMLElement, onSignedIn: () => void}} ctx @param {string} challenge */
function mfaStep(ctx, challenge) {
  const message = h("p", { class: "form-error", role: "alert" });
  const code = h("input", { inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}", maxlength: 6, required: true });
  const submit = h("button", { type: "submit", class: "primary big" }, "Verify");
  const form = h(
    "form",
    { class: "signin panel", "aria-labelledby": "mfa-title" },
    h("h1", { id: "mfa-title" }, "Two-step verification"),
    h("p", null, "Enter the six-digit code from your authenticator app."),
    message,
    field("Code", code),
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    submit.setAttribute("disabled", "");
    try {
      await verifyMfa(challenge, /** @type {HTMLInputElement} */ (code).value);
      ctx.onSignedIn();
    } catch (err) {
      message.textContent =
        err instanceof ApiError && err.status === 401 && /challenge/i.test(err.message)
          ? "The sign-in took too long; start again."
          : messageOf(err);
      submit.removeAttribute("disabled");
    }
  });
  mount(ctx.main, h("div", { class: "center" }, form));
  code.focus();
}
