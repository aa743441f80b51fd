// The live streams (/ws/farm-status, /ws/sensor-data, /ws/device-events): authenticate with the
// first message, subscribe to one farm, reconnect by themselves with a growing pause, and tell
// the shell when the link is down so it can show the banner.

import { accessToken, refresh } from "./api.js";

const CLOSE_UNAUTHENTICATED = 4401;
/** Whether this page is served by the cloud, whose streams carry what the farms' agents sync. */
export const SYNCED = document.querySelector('meta[name="farm-service"]')?.getAttribute("content") === "cloud";
/** @type {Set<(up: boolean) => void>} */
const watchers = new Set();
/** @type {Set<LiveStream>} */
const open = new Set();

/** @param {(up: boolean) => void} fn called with false when a stream is down, true when all are up */
export function onLinkChange(fn) {
  watchers.add(fn);
}

function report() {
  const up = [...open].every((s) => s.up);
  for (const fn of watchers) fn(up);
}

export class LiveStream {
  /**
   * @param {"farm-status"|"sensor-data"|"device-events"} name
   * @param {string|null} farmId
   * @param {(message: any) => void} onMessage
   * @param {{batchMs?: number, deviceIds?: string[]}} [options] batchMs: readings arrive as
   *   "readings" messages, one per period; deviceIds: only these devices' messages
   */
  constructor(name, farmId, onMessage, options = {}) {
    this.name = name;
    this.farmId = farmId;
    this.onMessage = onMessage;
    this.batchMs = options.batchMs;
    this.deviceIds = options.deviceIds;
    this.up = true;
    this.closed = false;
    this.delay = 1000;
    /** @type {WebSocket|null} */
    this.socket = null;
    this.timer = 0;
    open.add(this);
    this.connect();
  }

  connect() {
    if (this.closed) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(`${scheme}//${location.host}/ws/${this.name}`);
    this.socket = socket;
    socket.onopen = () => socket.send(JSON.stringify({ type: "auth", token: accessToken() }));
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "ready") {
        const subscribe = { type: "subscribe", farm_id: this.farmId };
        if (this.batchMs) subscribe.batch_ms = this.batchMs;
        if (this.deviceIds) subscribe.device_ids = this.deviceIds;
        socket.send(JSON.stringify(subscribe));
        this.delay = 1000;
        this.setUp(true);
      } else if (!["subscribed", "heartbeat", "pong"].includes(message.type)) {
        this.onMessage(message);
      }
    };
    socket.onclose = async (event) => {
      if (this.closed) return;
      this.setUp(false);
      if (event.code === CLOSE_UNAUTHENTICATED) {
        try {
          if (!(await refresh())) return; // signed out: the shell shows the sign-in screen
        } catch {
          /* connection lost: retry below */
        }
      }
      this.timer = window.setTimeout(() => this.connect(), this.delay);
      this.delay = Math.min(this.delay * 2, 15_000);
    };
  }

  /** @param {boolean} up */
  setUp(up) {
    if (this.up === up) return;
    this.up = up;
    report();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    open.delete(this);
    if (this.socket) this.socket.close(1000);
    report();
  }
}

/** Close every open stream (on leaving a screen). */
export function closeAll() {
  for (const stream of [...open]) stream.close();
}

/**
 * The readings a sensor-data message carries: a batch's list, or the one reading (with the
 * message's timestamp).
 * @param {any} message
 * @returns {{device_id: string, metric: string, unit: string, value: number, timestamp: string}[]}
 */
export function readingsOf(message) {
  if (message.type === "readings") return message.data.readings;
  if (message.type === "reading") return [{ ...message.data, timestamp: message.timestamp }];
  return [];
}

/**
 * Collect items and hand them to ``apply`` once per animation frame, so a burst of stream
 * messages costs one update of the page.
 * @template T @param {(items: T[]) => void} apply @returns {(item: T) => void}
 */
export function perFrame(apply) {
  /** @type {T[]} */
  let items = [];
  let scheduled = false;
  return (item) => {
    items.push(item);
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      const taken = items;
      items = [];
      apply(taken);
    });
  };
}
