// The query editor: every pause in typing asks the service to check the query
// (POST /v1/queries/validate, which registers nothing) and marks a parse error at its
// line and column in the text; Register stays off until the query is valid.

import { api } from "./api.js";
import { el } from "./dom.js";
import * as fmt from "./format.js";

const NAME = /^[A-Za-z_][A-Za-z0-9_]*(-[A-Za-z0-9_]+)*$/; // api.models.NAME_PATTERN
const PAUSE_MS = 250;

// The same kind of query in each of the three syntaxes the language reads.
export const EXAMPLES = {
  scemon: [
    "dinner_and_a_movie",
    "PATTERN Sequence WITH CNMA_A, RSTR_B, BAR_C\n" +
      "WHERE [symbol] $20 < CNMA_A.payment < $50 AND $80 < RSTR_B.payment < $120 AND BAR_C.payment < $50\n" +
      "WITHIN 5 hours",
  ],
  sase: ["bar_hopping", "PATTERN SEQ(RSTR_B r, BAR_C+ b[], CNMA_A c)\nWHERE count(b) >= 2\nWITHIN 4 hours"],
  zstream: ["splurge_after_dinner", "PATTERN RSTR_B r; BRND_A b\nWHERE b.payment > 2 * r.payment\nWITHIN 2 hours\nMODE ALL"],
};

/** The 0-based offset of a 1-based line and column in `text`. */
function offsetOf(text, line, column) {
  const lines = text.split("\n");
  let offset = 0;
  for (let i = 0; i < line - 1 && i < lines.length; i += 1) offset += lines[i].length + 1;
  return Math.min(text.length, offset + Math.max(0, column - 1));
}

export class Editor {
  constructor({ name, text, code, status, canonical, submit, example, onRegistered }) {
    Object.assign(this, { name, text, code, status, canonical, submit, example, onRegistered });
    this.gutter = code.querySelector(".gutter");
    this.backdrop = code.querySelector(".backdrop");
    this.asked = 0; // numbers the checks so a late answer to an old text is ignored
    this.valid = false;
    this.timer = null;

    const changed = () => {
      this.valid = false;
      this.submit.disabled = true;
      this.paint(null);
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.check(), PAUSE_MS);
    };
    text.addEventListener("input", changed);
    name.addEventListener("input", changed);
    text.addEventListener("scroll", () => this.syncScroll());
    text.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !this.submit.disabled) {
        event.preventDefault();
        this.register();
      }
    });
    submit.addEventListener("click", () => this.register());
    example.addEventListener("change", () => {
      const chosen = EXAMPLES[example.value];
      if (!chosen) return;
      if (!name.value.trim()) name.value = chosen[0];
      text.value = chosen[1];
      example.value = "";
      changed();
    });
    this.paint(null);
  }

  /** Ask the service whether the text (and the name, if any) would be accepted. */
  async check() {
    const text = this.text.value;
    const name = this.name.value.trim();
    const asked = ++this.asked;
    this.name.classList.toggle("bad", false);
    if (!text.trim()) {
      this.say("", "");
      this.canonical.hidden = true;
      return;
    }
    if (name && !NAME.test(name)) {
      this.name.classList.add("bad");
      this.say("bad", "The name must start with a letter or _, then letters, digits, _ and single inner -.");
      return;
    }
    const body = { text };
    if (name) body.name = name;
    try {
      const valid = await api("v1/queries/validate", { method: "POST", body });
      if (asked !== this.asked) return;
      const window = valid.window === null ? "no window" : `within ${fmt.seconds(valid.window)}`;
      // A sub-pattern is a derived class named by its pattern in the API: too long to read
      // here, and the canonical text below shows it.
      const classes = valid.classes.map((c) => (c.startsWith("(") ? "(sub-pattern)" : c));
      this.valid = true;
      this.say("ok", `Valid: ${valid.kind} over ${classes.join(", ")}, ${window}, mode ${valid.mode}.`);
      this.canonical.textContent = valid.text;
      this.canonical.hidden = false;
      this.submit.disabled = !name;
      if (!name) this.say("ok", `${this.status.textContent} Give it a name to register it.`);
    } catch (err) {
      if (asked !== this.asked) return;
      this.showError(err);
    }
  }

  showError(err) {
    this.valid = false;
    this.submit.disabled = true;
    this.canonical.hidden = true;
    const detail = err.detail || {};
    if (detail.field === "name" || err.status === 409) this.name.classList.add("bad");
    if (detail.line) {
      this.paint(detail);
      // The message already says where in words; the mark shows it in the text.
      this.say("bad", detail.message);
    } else {
      this.say("bad", detail.message || err.message);
    }
  }

  async register() {
    if (this.submit.disabled) return;
    const name = this.name.value.trim();
    this.submit.disabled = true;
    try {
      const query = await api("v1/queries", { method: "POST", body: { name, text: this.text.value } });
      this.say("ok", `Registered ${query.name}.`);
      this.name.value = "";
      this.text.value = "";
      this.canonical.hidden = true;
      this.paint(null);
      this.onRegistered(query);
    } catch (err) {
      this.showError(err);
    }
  }

  say(kind, message) {
    this.status.className = `status ${kind}`;
    this.status.textContent = message;
  }

  /** Line numbers, and the error's place marked in the backdrop behind the text. */
  paint(detail) {
    const text = this.text.value;
    const lines = Math.max(1, text.split("\n").length);
    const numbers = [];
    for (let i = 1; i <= lines; i += 1) {
      const span = el("span", detail && detail.line === i ? "bad" : "", `${i}\n`);
      numbers.push(span);
    }
    this.gutter.replaceChildren(...numbers);
    this.code.classList.toggle("bad", Boolean(detail));
    if (!detail) {
      this.backdrop.replaceChildren(document.createTextNode(text + "\n"));
    } else {
      const at = offsetOf(text, detail.line, detail.column || 1);
      // Mark one character; at a line's end or the text's end, a space stands for it.
      const char = text.charAt(at);
      const mark = el("mark", null, char && char !== "\n" ? char : " ");
      mark.title = detail.message;
      const rest = char && char !== "\n" ? text.slice(at + 1) : text.slice(at);
      this.backdrop.replaceChildren(document.createTextNode(text.slice(0, at)), mark, document.createTextNode(rest + "\n"));
    }
    this.syncScroll();
  }

  syncScroll() {
    this.backdrop.scrollTop = this.text.scrollTop;
    this.backdrop.scrollLeft = this.text.scrollLeft;
    this.gutter.scrollTop = this.text.scrollTop;
  }
}
