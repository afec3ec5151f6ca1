// The live match feed over the WebSocket /v1/matches/ws. It remembers the last seq it
// showed: pausing closes the socket, resuming reconnects from the next seq (the service
// sends what came in between from its match log), and so does every reconnect after a
// drop, so no match is missed or shown twice.

import { api, socketProtocols, socketUrl } from "./api.js";
import { el, perFrame } from "./dom.js";
import * as fmt from "./format.js";

const SHOWN = 200; // matches kept on the page, newest first
const BACKLOG = 50; // matches shown from before the page opened

export class Feed {
  constructor({ list, status, pause, filter, names }) {
    Object.assign(this, { list, status, pause, filter, names });
    this.socket = null;
    this.paused = false;
    this.query = ""; // "" = every query
    this.firstSeq = 0; // where this feed began: a new filter shows matches from here
    this.lastSeq = -1;
    this.received = 0;
    this.incoming = [];
    this.scheduleFlush = perFrame(() => this.flush());
    this.retry = 1000;
    this.known = new Set();

    pause.addEventListener("click", () => (this.paused ? this.resume() : this.stop()));
    filter.addEventListener("change", () => this.watch(filter.value.trim()));
    filter.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.watch(filter.value.trim());
    });
  }

  /** Begin with the last few matches before `nextSeq` (the service's next seq). */
  start(nextSeq) {
    this.firstSeq = Math.max(0, nextSeq - BACKLOG);
    this.lastSeq = this.firstSeq - 1;
    this.connect();
  }

  /** The registered query names, for the filter's suggestions. */
  setNames(names) {
    const key = names.join("\n");
    if (key === this.namesKey) return;
    this.namesKey = key;
    this.known = new Set(names);
    this.names.replaceChildren(...names.slice(0, 5000).map((n) => Object.assign(document.createElement("option"), { value: n })));
  }

  /** Show only `query`'s matches ("" for all), from where the feed began. */
  watch(query) {
    if (query === this.query) return;
    this.filter.value = query;
    this.query = query;
    this.close();
    this.list.replaceChildren();
    this.received = 0;
    this.lastSeq = this.firstSeq - 1;
    if (!this.paused) this.connect();
    else this.say(`Paused; will show ${query || "all queries"} from #${this.firstSeq} on resume.`);
  }

  stop() {
    this.paused = true;
    this.pause.textContent = "Resume";
    this.close();
    this.say(`Paused at #${this.lastSeq}. Resume continues from #${this.lastSeq + 1}; nothing is missed.`);
  }

  resume() {
    this.paused = false;
    this.pause.textContent = "Pause";
    this.connect();
  }

  close() {
    if (this.socket) {
      const socket = this.socket;
      this.socket = null;
      socket.onclose = socket.onmessage = socket.onerror = null;
      socket.close(1000);
    }
  }

  connect() {
    this.close();
    const from = this.lastSeq + 1;
    const url = socketUrl("v1/matches/ws", { from_seq: from, queries: this.query });
    const socket = new WebSocket(url, socketProtocols());
    this.socket = socket;
    let opened = false;
    this.say(`Connecting from #${from}…`);
    socket.onopen = () => {
      opened = true;
      this.retry = 1000;
      this.say(this.query ? `Live: ${this.query}` : "Live: all queries");
    };
    socket.onmessage = (event) => {
      const match = JSON.parse(event.data);
      if (match.seq <= this.lastSeq) return;
      this.lastSeq = match.seq;
      this.received += 1;
      this.incoming.push(match);
      if (this.incoming.length > SHOWN) this.incoming.splice(0, this.incoming.length - SHOWN);
      this.scheduleFlush();
    };
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (opened) {
        // Cut off for falling behind, or the service went away: resume from the last seq.
        this.say(`Disconnected (${event.reason || `code ${event.code}`}); resuming from #${this.lastSeq + 1}…`);
        setTimeout(() => !this.paused && !this.socket && this.connect(), 500);
      } else {
        this.refused();
      }
    };
  }

  /** The handshake was refused; a browser does not say why, so ask the same question
   * over REST, which answers in words, and act on it. */
  async refused() {
    try {
      const params = new URLSearchParams({ from_seq: String(this.lastSeq + 1), limit: "1" });
      if (this.query) params.set("query", this.query);
      await api(`v1/matches?${params}`);
      this.say(`The subscription failed; retrying in ${this.retry / 1000} s…`);
    } catch (err) {
      if (err.status === 410) {
        // Older than the match log keeps: start again from what is kept now.
        const stats = await api("v1/stats").catch(() => null);
        if (stats) {
          this.firstSeq = stats.matches;
          this.lastSeq = stats.matches - 1;
        }
      }
      this.say(`Cannot subscribe: ${err.message}`);
      if (err.status === 401 || err.status === 403 || err.status === 404) return;
    }
    const wait = this.retry;
    this.retry = Math.min(this.retry * 2, 15000);
    setTimeout(() => !this.paused && !this.socket && this.connect(), wait);
  }

  /** Put what arrived since the last frame on the page at once: a backlog of a
   * million matches costs a million JSON parses, not a million DOM updates. */
  flush() {
    const batch = this.incoming;
    this.incoming = [];
    const nodes = batch.reverse().map((m) => this.item(m));
    this.list.prepend(...nodes);
    while (this.list.childElementCount > SHOWN) this.list.lastElementChild.remove();
  }

  item(m) {
    const li = el("li");
    li.dataset.seq = m.seq;
    li.dataset.query = m.query;
    const head = el("div", "head");
    head.append(
      el("span", "seq", `#${m.seq}`),
      el("span", "query", m.query),
      el("span", "src", String(m.src)),
      el("span", "span", `${fmt.number(m.start)} → ${fmt.number(m.end)}`),
    );
    if (m.prob !== 1) head.append(el("span", "span", `p ${fmt.number(m.prob)}`));
    const events = el("div", "events");
    for (const e of m.events) {
      events.append(el("span", "event", Array.isArray(e) ? `[${e.join(", ")}]` : String(e)));
    }
    li.append(head, events);
    const attrs = Object.entries(m.attrs || {});
    if (attrs.length) li.append(el("div", "attrs", attrs.map(([k, v]) => `${k}=${v}`).join("  ")));
    return li;
  }

  say(message) {
    this.status.textContent = message;
  }
}
