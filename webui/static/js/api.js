// The one way the app talks to the server: /api/v1 and /auth with a bearer access token held in
// memory only. The refresh token lives in an httpOnly cookie the page cannot read; a refresh
// sends the readable CSRF cookie back as a header (protocol/http/browser_session.py).

/** An answer in the API's error envelope, or a lost connection (status 0). */
export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message @param {any} [details] */
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
    /** @type {number|null} seconds to wait, from Retry-After */
    this.retryAfter = null;
  }
}

/** @typedef {{id: string, email: string, role: string}} User */

const listeners = { session: new Set(), connection: new Set() };

/** @type {{token: string|null, user: User|null, expiresAt: number}} */
const session = { token: null, user: null, expiresAt: 0 };
/** @type {Promise<boolean>|null} */
let refreshing = null;
let refreshTimer = 0;

/** The signed-in user, or null. */
export function currentUser() {
  return session.user;
}

/** The access token for the streams' auth message. */
export function accessToken() {
  return session.token;
}

/** @param {"session"|"connection"} kind @param {(value: any) => void} fn */
export function on(kind, fn) {
  listeners[kind].add(fn);
}

/** @param {"session"|"connection"} kind @param {any} value */
function emit(kind, value) {
  for (const fn of listeners[kind]) fn(value);
}

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)farm_csrf=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

/** @param {any} result a LoginResult */
function adopt(result) {
  session.token = result.access_token;
  session.user = result.user;
  session.expiresAt = Date.now() + result.expires_in * 1000;
  clearTimeout(refreshTimer);
  // Refresh a minute before the access token ends, so a tablet left open stays signed in.
  const wait = Math.max(10_000, result.expires_in * 1000 - 60_000);
  refreshTimer = window.setTimeout(() => void refresh(), wait);
  emit("session", session.user);
}

/** Forget the session locally. @param {string} [reason] shown on the sign-in screen */
export function dropSession(reason) {
  session.token = null;
  session.user = null;
  clearTimeout(refreshTimer);
  emit("session", null);
  if (reason) sessionStorage.setItem("signin-message", reason);
}

/**
 * One HTTP exchange; the envelope of a failure becomes an ApiError.
 * @param {string} method @param {string} path @param {any} [body] @param {Record<string,string>} [headers]
 */
async function exchange(method, path, body, headers = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, /** @type {RequestInit} */ (init));
  } catch (err) {
    emit("connection", false);
    throw new ApiError(0, "CONNECTION_LOST", "The farm server cannot be reached; check the network.");
  }
  emit("connection", true);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && data.error;
    const failure = new ApiError(
      response.status,
      error ? error.code : "HTTP_" + response.status,
      error ? error.message : `The server answered ${response.status} ${response.statusText}`,
      error ? error.details : {},
    );
    const retry = response.headers.get("Retry-After");
    if (retry) failure.retryAfter = Number(retry);
    throw failure;
  }
  return data;
}

/**
 * Sign in; answers "ok" or an MFA challenge to finish with verifyMfa().
 * @param {string} email @param {string} password
 * @returns {Promise<{mfa: false} | {mfa: true, challenge: string}>}
 */
export async function signIn(email, password) {
  const result = await exchange("POST", "/api/v1/login", { email, password }, { "X-Session-Cookie": "1" });
  if (result.mfa_required) return { mfa: true, challenge: result.challenge };
  adopt(result);
  return { mfa: false };
}

/** @param {string} challenge @param {string} code */
export async function verifyMfa(challenge, code) {
  adopt(await exchange("POST", "/auth/mfa/verify", { challenge, code }, { "X-Session-Cookie": "1" }));
}

/** Renew the access token from the cookie session; false when there is no session. */
export function refresh() {
  if (!refreshing) {
    refreshing = exchange("POST", "/auth/refresh", {}, { "X-Session-Cookie": "1", "X-CSRF-Token": csrfToken() })
      .then((result) => {
        adopt(result);
        return true;
      })
      .catch((err) => {
        if (err.status === 0) throw err;
        if (session.user) dropSession("Your session has expired. Please sign in again.");
        return false;
      })
      .finally(() => {
        refreshing = null;
      });
  }
  return refreshing;
}

/** End the session on the server and here. */
export async function signOut() {
  try {
    if (session.token) await exchange("POST", "/auth/logout", undefined, { Authorization: `Bearer ${session.token}` });
  } finally {
    dropSession();
  }
}

/**
 * An authenticated API call; an expired token is refreshed once and the call repeated.
 * @param {string} method @param {string} path @param {any} [body]
 */
export async function call(method, path, body) {
  if (!session.token && !(await refresh())) throw new ApiError(401, "UNAUTHORIZED", "Please sign in.");
  try {
    return await exchange(method, path, body, { Authorization: `Bearer ${session.token}` });
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) throw err;
    if (!(await refresh())) throw err;
    return exchange(method, path, body, { Authorization: `Bearer ${session.token}` });
  }
}

/** GET with a query built from an object (undefined values left out). @param {string} path @param {Record<string, any>} [query] */
export function get(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const qs = params.toString();
  return call("GET", qs ? `${path}?${qs}` : path);
}

/** Every item of a paged list. @param {string} path @param {string} key @param {Record<string, any>} [query] */
export async function all(path, key, query = {}) {
  const items = [];
  for (let offset = 0; ; offset += 500) {
    const page = await get(path, { ...query, limit: 500, offset });
    items.push(...page[key]);
    if (items.length >= page.total || page[key].length === 0) return items;
  }
}
