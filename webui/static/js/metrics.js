// What people call the metrics the devices report, and how their values read: "EC 1,499 µS/cm",
// not "ec 1499.00". Every screen that shows a value names it through here.

/** @type {Record<string, {label: string, digits: number}>} */
const KNOWN = {
  temperature: { label: "Temperature", digits: 1 },
  water_temperature: { label: "Water temperature", digits: 1 },
  humidity: { label: "Humidity", digits: 0 },
  dew_point: { label: "Dew point", digits: 1 },
  vpd: { label: "VPD", digits: 2 },
  ph: { label: "pH", digits: 2 },
  ec: { label: "EC", digits: 0 },
  tds: { label: "TDS", digits: 0 },
  salinity: { label: "Salinity", digits: 2 },
  co2: { label: "CO₂", digits: 0 },
  light: { label: "Light", digits: 0 },
  illuminance: { label: "Light", digits: 0 },
  ppfd: { label: "PPFD", digits: 0 },
  pressure: { label: "Pressure", digits: 0 },
  power: { label: "Power", digits: 0 },
  energy: { label: "Energy", digits: 2 },
  flow: { label: "Flow", digits: 1 },
  level: { label: "Level", digits: 0 },
};

/** A metric's name for people: "Dew point" for dew_point. @param {string} metric */
export function metricLabel(metric) {
  return KNOWN[metric]?.label || metric.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());
}

/** Decimals worth showing for a metric. @param {string} metric */
export function metricDigits(metric) {
  return KNOWN[metric]?.digits ?? 1;
}

/** "Temperature (°C)"; the unit is left out when it repeats the name (pH). @param {string} metric @param {string} [unit] */
export function metricTitle(metric, unit) {
  const label = metricLabel(metric);
  return unit && unit !== label ? `${label} (${unit})` : label;
}

/** A value with its unit: "1,499 µS/cm", "23.4 °C", "58 %", "pH 6.12". @param {string} metric @param {number|null|undefined} value @param {string} [unit] */
export function formatValue(metric, value, unit) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  const digits = metricDigits(metric);
  const number = Number(value).toLocaleString(undefined, { minimumFractionDigits: digits, maximumFractionDigits: digits });
  if (!unit) return number;
  if (unit === "pH") return `pH ${number}`;
  return `${number} ${unit}`;
}
