// A small SVG line chart for the crawl timeline: time on x, values on y,
// one polyline per series, a legend below. No library.
const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function clock(t) {
  const d = new Date(t);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

// lineChart returns a div holding the chart of series [{name, color,
// points: [[t_ms, value]...], fill}], with opts.yFormat formatting y labels.
export function lineChart(series, opts = {}) {
  const W = 640, H = 220, L = 52, R = 12, T = 10, B = 24;
  const fmt = opts.yFormat || String;
  let t0 = Infinity, t1 = -Infinity, ymax = 0;
  for (const se of series) {
    for (const [t, v] of se.points) {
      t0 = Math.min(t0, t); t1 = Math.max(t1, t); ymax = Math.max(ymax, v);
    }
  }
  if (!isFinite(t0) || t1 <= t0) t1 = t0 + 1000;
  ymax = niceMax(ymax);
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    svg.append(s("line", { class: i ? "gridline" : "axis", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = t0 + (t1 - t0) * i / 4;
    // A short span reads better as seconds since its start.
    const label = t1 - t0 < 120000 ? (i === 0 ? clock(t) : "+" + Number(((t - t0) / 1000).toFixed(1)) + " s") : clock(t);
    svg.append(s("text", { x: x(t), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, label));
  }
  for (const se of series) {
    if (!se.points.length) continue;
    const d = se.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    if (se.fill) {
      const first = se.points[0], last = se.points[se.points.length - 1];
      svg.append(s("polygon", { points: `${x(first[0])},${y(0)} ${d} ${x(last[0])},${y(0)}`, fill: se.color, "fill-opacity": 0.12 }));
    }
    svg.append(s("polyline", { points: d, fill: "none", stroke: se.color, "stroke-width": 2, "stroke-linejoin": "round", "vector-effect": "non-scaling-stroke" }));
    const title = s("title", {}, se.name);
    svg.lastChild.append(title);
  }
  const box = document.createElement("div");
  box.append(svg);
  const legend = document.createElement("div");
  legend.className = "legend";
  for (const se of series) {
    const item = document.createElement("span");
    const sw = document.createElement("i");
    sw.style.background = se.color;
    const last = se.points.length ? se.points[se.points.length - 1][1] : 0;
    item.append(sw, se.name + " " + fmt(last));
    legend.append(item);
  }
  box.append(legend);
  return box;
}
