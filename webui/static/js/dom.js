// Tiny DOM helpers: h() builds elements, nothing else. No innerHTML anywhere, so no markup
// injection from API data and nothing the Content-Security-Policy would block.

/**
 * Build an element.
 * @param {string} tag  e.g. "button" or "svg:path" for SVG
 * @param {Record<string, any>|null} [attrs]  "on*" are listeners, "class", booleans, others attributes
 * @param {...any} children  nodes, strings, numbers, arrays; null/false are skipped
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "value" && !svg) {
      /** @type {any} */ (el).value = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return /** @type {HTMLElement} */ (el);
}

/** @param {Node} el @param {any[]} children */
function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. @param {Element} el @param {...any} children */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

let fieldSeq = 0;

/**
 * A labelled form field.
 * @param {string} label
 * @param {HTMLElement} control  an input, select or textarea (gets an id)
 * @param {string} [hint]
 */
export function field(label, control, hint) {
  const id = control.id || `f${++fieldSeq}`;
  control.id = id;
  const hintEl = hint ? h("small", { id: `${id}-hint`, class: "hint" }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl);
}

/** Format a number with a fixed number of decimals, or a dash. @param {number|null|undefined} v */
export function num(v, digits = 1) {
  return v === null || v === undefined || Number.isNaN(v) ? "–" : Number(v).toFixed(digits);
}

/** A short local time for an ISO timestamp. @param {string|null|undefined} iso */
export function when(iso) {
  if (!iso) return "never";
  const d = new Date(iso);
  const age = (Date.now() - d.getTime()) / 1000;
  if (age < 60) return "just now";
  if (age < 3600) return `${Math.round(age / 60)} min ago`;
  if (age < 86400) return `${Math.round(age / 3600)} h ago`;
  return d.toLocaleString();
}
