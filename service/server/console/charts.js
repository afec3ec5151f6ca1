// Line charts on a canvas: a fixed number of samples per series, redrawn whole (a few
// hundred points; cheaper than keeping DOM nodes for an SVG).

import { perFrame } from "./dom.js";

const CAPACITY = 300; // five minutes at one sample a second
const SHORTEST = 60; // the x axis spans at least a minute, then grows with the samples up to CAPACITY

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** The smallest "round" number (1, 2 or 5 times a power of ten) at or above x. */
function niceCeiling(x) {
  if (x <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(x));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= x) return step * power;
  }
  return 10 * power;
}

export class Chart {
  /**
   * @param figure the <figure> holding a <canvas> and an <output data-now>
   * @param series [{label, color: CSS variable name}], one line each
   * @param format how a value reads (axis and the current value)
   */
  constructor(figure, series, format) {
    this.canvas = figure.querySelector("canvas");
    this.now = figure.querySelector("[data-now]");
    this.series = series.map((s) => ({ ...s, values: [] }));
    this.format = format;
    this.schedule = perFrame(() => this.draw());
    new ResizeObserver(() => this.schedule()).observe(this.canvas);
  }

  /** Add one sample per series (null leaves a gap: nothing to measure then). */
  push(values) {
    this.series.forEach((s, i) => {
      s.values.push(values[i]);
      if (s.values.length > CAPACITY) s.values.shift();
    });
    const shown = this.series
      .map((s) => {
        const v = s.values[s.values.length - 1];
        return this.series.length > 1 ? `${s.label} ${this.format(v)}` : this.format(v);
      })
      .join(" · ");
    this.now.textContent = shown;
    this.schedule();
  }

  draw() {
    const canvas = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    if (!width || !height) return;
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
    }
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);

    let top = 0;
    for (const s of this.series) for (const v of s.values) if (v !== null && v > top) top = v;
    top = niceCeiling(top);
    const left = 4, right = width - 4, bottom = height - 14, ceiling = 12;
    const y = (v) => bottom - (v / top) * (bottom - ceiling);
    const span = Math.min(CAPACITY, Math.max(SHORTEST, ...this.series.map((s) => s.values.length)));
    const step = (right - left) / (span - 1);

    g.font = `10px ${cssVar("--mono") || "monospace"}`;
    g.fillStyle = cssVar("--muted");
    g.strokeStyle = cssVar("--line");
    g.lineWidth = 1;
    for (const v of [0, top / 2, top]) {
      g.beginPath();
      g.moveTo(left, Math.round(y(v)) + 0.5);
      g.lineTo(right, Math.round(y(v)) + 0.5);
      g.stroke();
    }
    g.textBaseline = "bottom";
    g.fillText(this.format(top), left + 2, y(top) - 1);
    g.textBaseline = "top";
    g.fillText(span >= 120 ? `${Math.round(span / 60)} min ago` : `${span} s ago`, left + 2, bottom + 2);
    g.textAlign = "right";
    g.fillText("now", right, bottom + 2);
    g.textAlign = "left";

    for (const s of this.series) {
      const offset = span - s.values.length;
      g.strokeStyle = cssVar(s.color);
      g.lineWidth = 1.6;
      g.beginPath();
      let drawing = false;
      s.values.forEach((v, i) => {
        if (v === null || v === undefined) {
          drawing = false;
          return;
        }
        const px = left + (offset + i) * step, py = y(v);
        if (drawing) g.lineTo(px, py);
        else g.moveTo(px, py);
        drawing = true;
      });
      g.stroke();
    }
  }
}
