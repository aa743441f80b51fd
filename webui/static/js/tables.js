// Every table cell carries its column's name (data-label), so that on a phone, where app.css
// shows each row as a card, a value is read under its name. Tables come and go with the
// screens and their live updates: one observer labels whatever is added to the page.

/** Label the cells of ``table`` from its header row. @param {HTMLTableElement} table */
function label(table) {
  const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent?.trim() || "");
  if (!names.length) return;
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => {
      if (names[i] && cell.tagName === "TD" && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", names[i]);
    });
  }
}

/** Keep every table under ``root`` labelled, now and as screens change. @param {Element} root */
export function labelTables(root) {
  const all = () => root.querySelectorAll("table").forEach((t) => label(/** @type {HTMLTableElement} */ (t)));
  all();
  new MutationObserver(all).observe(root, { childList: true, subtree: true });
}
