// How numbers, times and sizes read on the page.

const integer = new Intl.NumberFormat("en", { maximumFractionDigits: 0 });

export function count(n) {
  return n === null || n === undefined ? "—" : integer.format(n);
}

/** A rate or any float: 3 significant digits, thousands grouped. */
export function number(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  if (x === 0) return "0";
  const abs = Math.abs(x);
  if (abs >= 100) return integer.format(x);
  if (abs >= 10) return x.toFixed(1);
  if (abs >= 0.01) return x.toFixed(2);
  return x.toPrecision(2);
}

/** A window or a span in seconds: "90 s", "5 min", "1.5 h", "2 d". */
export function seconds(s) {
  if (s === null || s === undefined) return "—";
  const units = [[86400, "d"], [3600, "h"], [60, "min"]];
  for (const [size, name] of units) {
    if (s >= size) return `${+(s / size).toFixed(2)} ${name}`;
  }
  return `${+s.toFixed(3)} s`;
}

/** An uptime: "3 d 4 h", "2 h 5 min", "4 min 12 s", "9 s". */
export function duration(s) {
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60), sec = s % 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${sec} s`;
  return `${sec} s`;
}

/** A latency: "0.85 ms", "12.5 ms", "340 ms", "2.5 s". */
export function milliseconds(s) {
  if (s === null || s === undefined) return "—";
  if (s >= 1) return `${+s.toFixed(2)} s`;
  const ms = s * 1000;
  return ms >= 100 ? `${integer.format(ms)} ms` : `${ms.toFixed(ms >= 10 ? 1 : 2)} ms`;
}

export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}
