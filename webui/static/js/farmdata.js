// What several screens need about one farm, fetched in parallel: its rows, racks and shelves,
// sensors and devices, active plans and alerts, climate settings; and where each sensor sits.

import { ApiError, all, get } from "./api.js";

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
  if (known) return known;
  return { key: metric, label: metric.replace(/_/g, " "), unit: unit ? ` ${unit}` : "", digits: 1 };
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
const HIERARCHY_TTL_MS = 60_000;

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

/** @param {string} farmId */
export async function loadFarm(farmId) {
  const [rows, listed, devices, plans, alerts, climate] = await Promise.all([
    loadHierarchy(farmId),
    optional(all("/api/v1/sensors", "sensors", { farm_id: farmId }), null),
    all("/api/v1/devices", "devices", { farm_id: farmId }),
    optional(all("/api/v1/grow-plans", "grow_plans", { farm_id: farmId, status: "active" }), []),
    optional(all("/api/v1/alerts", "alerts", { farm_id: farmId, state: "active" }), []),
    optional(get("/api/v1/climate-control", { farm_id: farmId }), { climate_controls: [] }),
  ]);
  const sensors = listed || sensorsOf(devices);
  const progress = await Promise.all(
    plans.map((p) => get(`/api/v1/grow-plans/${p.id}/progress`).catch(() => null)),
  );
  plans.forEach((p, i) => (p.progress = progress[i]));
  return { rows, sensors, devices, plans, alerts, climate: climate.climate_controls };
}

/** Sensors as the device registry describes them, where no sensor list is served. @param {any[]} devices */
export function sensorsOf(devices) {
  return devices.filter((d) => d.kind === "sensor").map((d) => ({ ...d, metrics: [], calibration: null }));
}

/** Lower-case name for matching a device's free-text location to a structure. @param {string} s */
const norm = (s) => (s || "").trim().toLowerCase();

/**
 * Which shelves each sensor covers: its location names a shelf, a rack or a row (the most
 * specific wins); other sensors are farm-wide.
 * @param {any[]} rows @param {any[]} sensors
 * @returns {{byShelf: Map<string, any[]>, unplaced: any[]}}
 */
export function placeSensors(rows, sensors) {
  /** @type {Map<string, any[]>} */
  const byShelf = new Map();
  const unplaced = [];
  for (const sensor of sensors) {
    const where = norm(sensor.location);
    const shelves = [];
    for (const row of rows) {
      for (const rack of row.racks) {
        for (const shelf of rack.shelves) {
          if (norm(shelf.name) === where) shelves.push({ shelf, rank: 3 });
          else if (norm(rack.name) === where) shelves.push({ shelf, rank: 2 });
          else if (norm(row.name) === where || norm(row.name).split(":")[0] === where) shelves.push({ shelf, rank: 1 });
        }
      }
    }
    const best = Math.max(0, ...shelves.map((s) => s.rank));
    if (!best) unplaced.push(sensor);
    for (const { shelf, rank } of shelves) {
      if (rank !== best) continue;
      if (!byShelf.has(shelf.id)) byShelf.set(shelf.id, []);
      /** @type {any[]} */ (byShelf.get(shelf.id)).push(sensor);
    }
  }
  return { byShelf, unplaced };
}

/** Latest value of each metric of a sensor, from its last two minutes of data. @param {any} sensor */
export async function latestValues(sensor) {
  /** @type {Record<string, number>} */
  const values = {};
  // Without a last-reading time (the cloud's mirror may not carry one) look at the last hour.
  const end = sensor.last_reading ? new Date(new Date(sensor.last_reading).getTime() + 1000) : new Date();
  const start = new Date(end.getTime() - (sensor.last_reading ? 120_000 : 3600_000));
  const data = await get(`/api/v1/sensors/${sensor.id}/data`, {
    start: start.toISOString(),
    end: end.toISOString(),
    max_points: 10,
  });
  for (const series of data.series) {
    const last = series.points[series.points.length - 1];
    if (last) values[series.metric] = last.value;
  }
  return values;
}

/** The metric key SHELF_METRICS uses for a reported metric name. @param {string} metric */
export function shelfMetric(metric) {
  const m = SHELF_METRICS.find((x) => x.key === metric || (x.aliases || []).includes(metric));
  return m ? m.key : null;
}
