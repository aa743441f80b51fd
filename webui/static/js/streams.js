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
   */
  constructor(name, farmId, onMessage) {
    this.name = name;
    this.farmId = farmId;
    this.onMessage = onMessage;
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
        socket.send(JSON.stringify({ type: "subscribe", farm_id: this.farmId }));
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
