// The service's figures (GET /v1/stats, read every second): rates from the difference
// of two readings into the charts, the rest as facts. Fields this page does not know
// (a newer service's) are shown as they come, so nothing the service reports is hidden.

import { Chart } from "./charts.js";
import { el } from "./dom.js";
import * as fmt from "./format.js";

// Facts shown first, in this order, when the service reports them; `warn` marks a
// non-zero value (something to look at).
const KNOWN = [
  ["kernel", "Kernel", String],
  ["uptime", "Uptime", fmt.duration],
  ["store_bytes", "Store", fmt.bytes],
  ["late_events", "Late events", fmt.count, "warn"],
  ["engine.queries", "Queries", fmt.count],
  ["matches", "Matches", fmt.count],
  ["engine.ecqs", "ECQs", fmt.count],
  ["engine.stored_instances", "Stored instances", fmt.count],
  ["engine.pmb_entries", "PMB entries", fmt.count],
  ["engine.pending_matches", "Pending matches", fmt.count],
  ["engine.clock", "Engine clock", (v) => (v === null ? "—" : fmt.number(v))],
  ["subscribers", "Subscribers", fmt.count],
  ["overflows", "Subscribers cut off", fmt.count, "warn"],
  ["duplicates", "Duplicate batches", fmt.count],
];
// Shown elsewhere (charts, header) or not for people.
const SKIP = new Set([
  "state", "started", "events", "batches", "ingest", "backlog", "backlog_max", "subscriber_queue", "engine",
  "engine.events", "engine.matches", "engine.next_seq",
]);

function lookup(stats, path) {
  let value = stats;
  for (const part of path.split(".")) {
    if (value === null || typeof value !== "object" || !(part in value)) return undefined;
    value = value[part];
  }
  return value;
}

/** Every scalar of `stats` and of the objects in it not in SKIP (`engine`, and any a
 * newer service adds), by dotted path. */
function scalars(stats) {
  const out = [];
  for (const [key, value] of Object.entries(stats)) {
    if (value !== null && typeof value === "object") {
      if (!Array.isArray(value) && (key === "engine" || !SKIP.has(key))) {
        for (const [inner, v] of Object.entries(value)) {
          if (v === null || typeof v !== "object") out.push([`${key}.${inner}`, v]);
        }
      }
    } else {
      out.push([key, value]);
    }
  }
  return out;
}

function label(path) {
  const name = path.replace(/^engine\./, "").replace(/_/g, " ");
  return name.charAt(0).toUpperCase() + name.slice(1);
}

function plain(v) {
  if (typeof v === "number") return Number.isInteger(v) ? fmt.count(v) : fmt.number(v);
  return v === null ? "—" : String(v);
}

/** The latency within which `share` of the batches in the difference of two
 * cumulative histograms were answered: the upper bound of the bucket it falls in. */
function quantile(before, after, share) {
  const total = after.count - before.count;
  if (total <= 0) return null;
  for (let i = 0; i < after.buckets.length; i += 1) {
    const within = after.buckets[i][1] - (before.buckets[i] ? before.buckets[i][1] : 0);
    if (within >= share * total) return after.buckets[i][0];
  }
  return after.buckets.length ? after.buckets[after.buckets.length - 1][0] : null;
}

// Answer times are averaged over this many readings (seconds): batches come every few
// hundred milliseconds to every few seconds, and a one-second window would mostly be empty.
const LATENCY_READINGS = 5;

export class StatsPanel {
  constructor({ facts, state, headline }) {
    this.facts = facts;
    this.state = state;
    this.headline = headline;
    this.readings = []; // the last LATENCY_READINGS + 1 readings, oldest first
    const rate = (v) => fmt.number(v);
    this.charts = {
      events: new Chart(document.getElementById("chart-events"), [{ label: "events", color: "--accent" }], rate),
      matches: new Chart(document.getElementById("chart-matches"), [{ label: "matches", color: "--good" }], rate),
      latency: new Chart(
        document.getElementById("chart-latency"),
        [
          { label: "mean", color: "--accent" },
          { label: "p99", color: "--accent-2" },
        ],
        fmt.milliseconds,
      ),
      backlog: new Chart(
        document.getElementById("chart-backlog"),
        [
          { label: "all", color: "--accent" },
          { label: "longest", color: "--accent-2" },
        ],
        fmt.count,
      ),
    };
  }

  /** A reading failed: say so, and leave a gap in the charts. */
  down(message) {
    this.state.textContent = "unreachable";
    this.state.dataset.state = "down";
    this.state.title = message;
    this.readings = [];
  }

  update(stats) {
    this.state.textContent = stats.state === "ok" ? "serving" : stats.state;
    this.state.dataset.state = stats.state;
    this.state.title = "";
    const kernel = stats.kernel ?? (stats.engine ? stats.engine.kernel : undefined);
    const parts = [`up ${fmt.duration(stats.uptime)}`];
    if (kernel !== undefined) parts.push(`kernel ${kernel}`);
    const queries = stats.engine?.queries ?? 0;
    parts.push(`${fmt.count(queries)} ${queries === 1 ? "query" : "queries"}`);
    parts.push(`${fmt.count(stats.matches)} ${stats.matches === 1 ? "match" : "matches"}`);
    this.headline.textContent = parts.join(" · ");

    const before = this.readings[this.readings.length - 1];
    // A restarted service counts from zero again: start the rates afresh.
    if (before && !(stats.uptime > before.uptime && stats.events >= before.events)) this.readings = [];
    if (this.readings.length) {
      const dt = stats.uptime - before.uptime;
      this.charts.events.push([(stats.events - before.events) / dt]);
      this.charts.matches.push([Math.max(0, stats.matches - before.matches) / dt]);
      const oldest = this.readings[0];
      const batches = stats.ingest.count - oldest.ingest.count;
      this.charts.latency.push(
        batches > 0
          ? [(stats.ingest.seconds - oldest.ingest.seconds) / batches, quantile(oldest.ingest, stats.ingest, 0.99)]
          : [null, null],
      );
    }
    this.charts.backlog.push([stats.backlog, stats.backlog_max]);
    this.readings.push(stats);
    if (this.readings.length > LATENCY_READINGS + 1) this.readings.shift();
    this.renderFacts(stats);
  }

  renderFacts(stats) {
    const rows = [];
    const seen = new Set(SKIP);
    for (const [path, name, format, warn] of KNOWN) {
      const value = lookup(stats, path);
      seen.add(path);
      if (value === undefined) continue;
      rows.push([name, format(value), warn && value > 0, path]);
    }
    for (const [path, value] of scalars(stats)) {
      if (seen.has(path)) continue;
      // Anything about late events deserves attention when it is not zero.
      rows.push([label(path), plain(value), /late/.test(path) && value > 0, path]);
    }
    const nodes = rows.map(([name, text, warn, path]) => {
      const div = el("div", warn ? "warn" : "");
      div.dataset.key = path;
      div.append(el("dt", null, name), el("dd", null, text));
      return div;
    });
    this.facts.replaceChildren(...nodes);
  }
}
