// The query list: sorted and filtered in memory, and only the rows in view (plus a few)
// are in the DOM, positioned over a spacer as tall as the whole list, so ten thousand
// queries scroll as smoothly as ten.

import { el, perFrame } from "./dom.js";
import * as fmt from "./format.js";

const OVERSCAN = 6;

const COMPARE = {
  name: (a, b) => a.name.localeCompare(b.name),
  text: (a, b) => a.text.localeCompare(b.text),
  mode: (a, b) => a.mode.localeCompare(b.mode),
  window: (a, b) => (a.window ?? Infinity) - (b.window ?? Infinity),
  matches: (a, b) => a.matches - b.matches,
  rate: (a, b) => a.rate - b.rate,
};

export class QueryTable {
  /**
   * @param onDelete (name) => void, or null when the caller may not delete
   * @param onWatch (name) => void: show this query's matches in the feed
   */
  constructor({ viewport, filter, count, headers, onDelete, onWatch }) {
    this.viewport = viewport;
    this.spacer = viewport.querySelector(".spacer");
    this.count = count;
    this.headers = headers;
    this.onDelete = onDelete;
    this.onWatch = onWatch;
    this.queries = [];
    this.view = [];
    this.needle = "";
    this.sortKey = null;
    this.sortDir = 1;
    this.rows = []; // the pool of row elements, reused as the view scrolls
    this.rowHeight = 28;
    this.schedule = perFrame(() => this.render());

    viewport.addEventListener("scroll", () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(viewport);
    filter.addEventListener("input", () => {
      this.needle = filter.value.trim().toLowerCase();
      this.refresh();
      viewport.scrollTop = 0;
    });
    for (const header of headers) {
      header.addEventListener("click", () => this.sortBy(header.dataset.sort));
    }
  }

  setQueries(queries) {
    this.queries = queries;
    this.refresh();
  }

  sortBy(key) {
    if (this.sortKey === key) this.sortDir = -this.sortDir;
    else {
      this.sortKey = key;
      // Counts and rates are read largest first; names and text A to Z.
      this.sortDir = key === "matches" || key === "rate" || key === "window" ? -1 : 1;
    }
    for (const header of this.headers) {
      if (header.dataset.sort === this.sortKey) {
        header.setAttribute("aria-sort", this.sortDir > 0 ? "ascending" : "descending");
      } else header.removeAttribute("aria-sort");
    }
    this.refresh();
  }

  /** Recompute the filtered, sorted view (O(n log n)) and redraw the rows in view. */
  refresh() {
    const needle = this.needle;
    let view = needle
      ? this.queries.filter((q) => q.name.toLowerCase().includes(needle) || q.text.toLowerCase().includes(needle))
      : this.queries.slice();
    if (this.sortKey) {
      const compare = COMPARE[this.sortKey], dir = this.sortDir;
      view.sort((a, b) => dir * compare(a, b) || a.name.localeCompare(b.name));
    }
    this.view = view;
    const total = this.queries.length;
    this.count.textContent =
      view.length === total
        ? `${fmt.count(total)} ${total === 1 ? "query" : "queries"}`
        : `${fmt.count(view.length)} of ${fmt.count(total)}`;
    this.spacer.style.height = `${view.length * this.rowHeight}px`;
    this.schedule();
  }

  render() {
    const height = this.viewport.clientHeight;
    const first = Math.max(0, Math.floor(this.viewport.scrollTop / this.rowHeight) - OVERSCAN);
    const last = Math.min(this.view.length, Math.ceil((this.viewport.scrollTop + height) / this.rowHeight) + OVERSCAN);
    const needed = Math.max(0, last - first);
    while (this.rows.length < needed) {
      const row = this.makeRow();
      this.rows.push(row);
      this.viewport.append(row.node);
    }
    this.rows.forEach((row, i) => {
      const index = first + i;
      if (index < last) {
        row.node.hidden = false;
        this.fill(row, this.view[index], index);
      } else {
        row.node.hidden = true;
        row.name = null;
      }
    });
  }

  makeRow() {
    const node = el("div", "qrow");
    node.setAttribute("role", "row");
    const cells = {
      name: el("button", "name"),
      text: el("code", "text"),
      mode: el("span", "mode"),
      window: el("span", "num window"),
      matches: el("span", "num matches"),
      rate: el("span", "num rate"),
      actions: el("span", "actions"),
    };
    cells.name.type = "button";
    cells.name.title = "Show this query's matches in the feed";
    for (const cell of Object.values(cells)) {
      cell.setAttribute("role", "cell");
      node.append(cell);
    }
    const row = { node, cells, name: null };
    cells.name.addEventListener("click", () => row.name && this.onWatch(row.name));
    if (this.onDelete) {
      const del = el("button", "del", "Delete");
      del.type = "button";
      del.addEventListener("click", () => row.name && this.onDelete(row.name));
      cells.actions.append(del);
    }
    return row;
  }

  fill(row, q, index) {
    row.name = q.name;
    row.node.dataset.name = q.name;
    row.node.style.transform = `translateY(${index * this.rowHeight}px)`;
    const { cells } = row;
    cells.name.textContent = q.name;
    cells.text.textContent = q.text.replace(/\s*\n\s*/g, " ");
    cells.text.title = q.text;
    cells.mode.textContent = q.mode;
    cells.window.textContent = q.window === null ? "—" : fmt.seconds(q.window);
    cells.matches.textContent = fmt.count(q.matches);
    cells.rate.textContent = fmt.number(q.rate);
    cells.rate.classList.toggle("fresh", q.rate > 0);
  }
}
