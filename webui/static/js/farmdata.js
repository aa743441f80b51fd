// What several screens need about one farm: the overview (one request for the whole farm), the
// names of its places, its rows, racks and shelves, and how metrics are labelled.

import { ApiError, all, get } from "./api.js";
import { metricDigits, metricLabel } from "./metrics.js";

/**
 * A read some servers do not offer (the cloud serves fewer than the agent): a 404 for the path
 * itself gives ``fallback``; any other failure is the caller's to show.
 * @template T @param {Promise<T>} call @param {T} fallback
 */
export function optional(call, fallback) {
  return call.catch((err) => {
    if (err instanceof ApiError && err.status === 404 && err.message === "No such endpoint") return fallback;
    throw err;
  });
}

/** Metrics the overview shows on each shelf, in order, with short labels and decimals. */
export const SHELF_METRICS = [
  { key: "temperature", label: "Temp", unit: "°C", digits: 1 },
  { key: "humidity", label: "RH", unit: "%", digits: 0 },
  { key: "ph", label: "pH", unit: "", digits: 2 },
  { key: "ec", label: "EC", unit: "", digits: 2 },
  { key: "light", label: "Light", unit: "", digits: 0, aliases: ["illuminance", "ppfd", "lux"] },
  { key: "co2", label: "CO₂", unit: " ppm", digits: 0 },
];

/** How long the layout (and the overview's copy for other screens) is kept in the page. */
const HIERARCHY_TTL_MS = 60_000;

/** @type {Map<string, {at: number, overview: Promise<any>}>} */
const overviews = new Map();

/**
 * The farm at a glance in one request (GET /farms/{id}/overview): layout, each shelf's sensors
 * with their latest values and per-metric aggregates, offline devices and active alerts. The
 * answer is kept for a minute for screens that need only the layout (``fresh`` asks again).
 * @param {string} farmId @param {{fresh?: boolean}} [options]
 */
export function loadOverview(farmId, options = {}) {
  const cached = overviews.get(farmId);
  if (!options.fresh && cached && Date.now() - cached.at < HIERARCHY_TTL_MS) return cached.overview;
  const overview = get(`/api/v1/farms/${farmId}/overview`, { offline_limit: 5, alert_limit: 50 });
  overviews.set(farmId, { at: Date.now(), overview });
  overview.catch(() => overviews.delete(farmId));
  return overview;
}

/** Names of a farm's rows, racks and shelves (for location fields and filters), from the overview. @param {string} farmId */
export async function loadPlaces(farmId) {
  const overview = await loadOverview(farmId);
  return overview.rows.flatMap((/** @type {any} */ row) => [
    row.name,
    ...row.racks.flatMap((/** @type {any} */ rack) => [rack.name, ...rack.shelves.map((/** @type {any} */ s) => s.name)]),
  ]);
}

/** How the overview shows a reported metric: label, unit, decimals. @param {string} metric @param {string} [unit] */
export function metricInfo(metric, unit = "") {
  const known = SHELF_METRICS.find((x) => x.key === metric || (x.aliases || []).includes(metric));
  const reported = unit ? ` ${unit}` : "";
  // A shelf's short label, with the unit the sensors report where the list names none (EC in µS/cm).
  if (known) return known.unit || known.key === "ph" ? known : { ...known, unit: reported, digits: metricDigits(known.key) };
  return { key: metric, label: metricLabel(metric), unit: reported, digits: metricDigits(metric) };
}

/** Order of metrics on a shelf: the known ones first, in SHELF_METRICS order. @param {string} a @param {string} b */
export function metricOrder(a, b) {
  const rank = (/** @type {string} */ m) => {
    const i = SHELF_METRICS.findIndex((x) => x.key === m || (x.aliases || []).includes(m));
    return i < 0 ? SHELF_METRICS.length : i;
  };
  return rank(a) - rank(b) || a.localeCompare(b);
}

/** @type {Map<string, {at: number, rows: Promise<any[]>}>} */
const hierarchies = new Map();

/**
 * The farm's rows with their racks and shelves. Kept for a minute: the layout rarely changes
 * and fetching it costs a request per rack, which the per-user rate limit counts.
 * @param {string} farmId
 */
export function loadHierarchy(farmId) {
  const cached = hierarchies.get(farmId);
  if (cached && Date.now() - cached.at < HIERARCHY_TTL_MS) return cached.rows;
  const rows = fetchHierarchy(farmId);
  hierarchies.set(farmId, { at: Date.now(), rows });
  rows.catch(() => hierarchies.delete(farmId));
  return rows;
}

/** @param {string} farmId */
async function fetchHierarchy(farmId) {
  const rows = await all("/api/v1/rows/", "rows", { farm_id: farmId });
  const racksPerRow = await Promise.all(rows.map((r) => all("/api/v1/racks/", "racks", { row_id: r.id })));
  const racks = racksPerRow.flat();
  const shelvesPerRack = await Promise.all(racks.map((r) => all("/api/v1/shelves/", "shelves", { rack_id: r.id })));
  rows.sort((a, b) => a.position - b.position);
  return rows.map((row, i) => ({
    ...row,
    racks: racksPerRow[i]
      .sort((a, b) => a.position - b.position)
      .map((rack) => ({
        ...rack,
        shelves: shelvesPerRack[racks.indexOf(rack)].sort((a, b) => b.level - a.level),
      })),
  }));
}

/** Sensors as the device registry describes them, where no sensor list is served. @param {any[]} devices */
export function sensorsOf(devices) {
  return devices.filter((d) => d.kind === "sensor").map((d) => ({ ...d, metrics: [], calibration: null }));
}

