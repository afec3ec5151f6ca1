// The console's entry: find out who we are (asking for a token when the service has
// tokens), show only what that role may do, then keep the figures, the query list and
// the match feed live.

import { api, token } from "./api.js";
import { Editor } from "./editor.js";
import { Feed } from "./feed.js";
import { QueryTable } from "./queries.js";
import { showShards } from "./shards.js";
import { StatsPanel } from "./stats.js";

const $ = (id) => document.getElementById(id);
const STATS_EVERY_MS = 1000;
// The list is read every 2 s, less often when it is long (3,000 queries are ~800 kB of
// JSON), and not at all while the tab is hidden.
const queriesEveryMs = (n) => Math.max(2000, Math.min(10000, n * 2));

/** Show the token dialog until a token is given; `message` says why it is asked for. */
function askForToken(message) {
  const dialog = $("token-dialog");
  const input = $("token-input");
  $("token-error").textContent = message || "";
  input.value = "";
  return new Promise((resolve) => {
    $("token-form").onsubmit = (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (!value) return;
      token.set(value);
      dialog.close();
      resolve();
    };
    dialog.oncancel = (event) => event.preventDefault(); // nothing to show without one
    if (!dialog.open) dialog.showModal();
    input.focus();
  });
}

/** Ask before deleting; resolves true to go ahead. */
function confirmDelete(name) {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = `Delete the query ${name}?`;
  $("confirm-text").textContent =
    "It stops matching at once; the matches it made stay in the match log. While other queries read it as @" +
    name +
    ", it is not deleted: delete those first.";
  return new Promise((resolve) => {
    const done = (answer) => {
      dialog.close();
      resolve(answer);
    };
    $("confirm-form").onsubmit = (event) => {
      event.preventDefault();
      done(true);
    };
    $("confirm-cancel").onclick = () => done(false);
    dialog.oncancel = () => resolve(false);
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}

/** Who the caller is: GET /v1/whoami, asking for a token while the service wants one. */
async function identify() {
  let reason = "";
  for (;;) {
    try {
      return await api("v1/whoami");
    } catch (err) {
      if (err.status === 401) {
        const had = token.get();
        token.clear();
        await askForToken(had ? `That token was refused: ${err.message}` : reason);
        reason = "";
      } else {
        $("service-state").textContent = "unreachable";
        $("service-state").dataset.state = "down";
        $("service-state").title = err.message;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }
}

/** Run `task` now, then again `interval()` ms after each run ends, skipping runs while
 * the tab is hidden. */
function every(interval, task) {
  const tick = async () => {
    if (!document.hidden) await task();
    setTimeout(tick, interval());
  };
  tick();
}

async function main() {
  const me = await identify();
  const may = new Set(me.may);
  const role = $("role");
  role.hidden = false;
  role.textContent = me.auth ? `role: ${me.role}` : "auth off";
  role.title = `May: ${me.may.join(", ").replace(/_/g, " ")}`;
  $("forget-token").hidden = !me.auth;
  $("forget-token").onclick = () => {
    token.clear();
    location.reload();
  };
  for (const node of document.querySelectorAll("[data-needs]")) {
    node.hidden = !may.has(node.dataset.needs);
  }
  showShards($("shard"));

  const message = $("query-message");
  const say = (text, bad = false) => {
    message.textContent = text;
    message.classList.toggle("bad", bad);
  };
  const feed = may.has("read_matches")
    ? new Feed({ list: $("feed-list"), status: $("feed-status"), pause: $("feed-pause"), filter: $("feed-filter"), names: $("query-names") })
    : null;

  let refreshQueries;
  const table = new QueryTable({
    viewport: $("query-rows"),
    filter: $("query-filter"),
    count: $("query-count"),
    headers: [...document.querySelectorAll(".qhead [data-sort]")],
    onWatch: (name) => (feed ? feed.watch(name) : say("Your role may not read matches.", true)),
    onDelete: may.has("manage_queries")
      ? async (name) => {
          if (!(await confirmDelete(name))) return;
          try {
            await api(`v1/queries/${encodeURIComponent(name)}`, { method: "DELETE" });
            say(`Deleted ${name}.`);
          } catch (err) {
            say(`Cannot delete ${name}: ${err.message}`, true);
          }
          await refreshQueries();
        }
      : null,
  });

  refreshQueries = async () => {
    try {
      const { queries } = await api("v1/queries");
      table.setQueries(queries);
      if (feed) feed.setNames(queries.map((q) => q.name));
    } catch (err) {
      say(`Cannot list the queries: ${err.message}`, true);
    }
  };

  if (may.has("manage_queries")) {
    new Editor({
      name: $("q-name"),
      text: $("q-text"),
      code: $("q-code"),
      status: $("q-status"),
      canonical: $("q-canonical"),
      submit: $("q-submit"),
      example: $("q-example"),
      onRegistered: (query) => {
        say(`Registered ${query.name}.`);
        refreshQueries();
      },
    });
  }

  const stats = new StatsPanel({ facts: $("facts"), state: $("service-state"), headline: $("headline") });
  let feedStarted = false;
  every(() => STATS_EVERY_MS, async () => {
    try {
      const figures = await api("v1/stats");
      stats.update(figures);
      if (feed && !feedStarted) {
        feedStarted = true;
        feed.start(figures.matches);
      }
    } catch (err) {
      stats.down(err.message);
    }
  });
  every(() => queriesEveryMs(table.queries.length), refreshQueries);
  document.body.dataset.ready = "true";
}

main();
