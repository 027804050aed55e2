// A memory's history (GET /memories/{id}/history): a small chart of its scores over its
// changes and a table of every change, oldest first. Text only ever as text nodes.
import { api } from "./api.js";
import { h, s, fill, num } from "./dom.js";

const SCORES = [["importance", "#2f6fdf"], ["confidence", "#d9822b"], ["stability", "#3a9a5b"]];
const W = 320, H = 90, PAD = 6;

/** Load and show the history of memory `id` in `box`; onOpen(id) opens another memory. */
export async function showHistory(box, id, onOpen) {
  const page = await api(`/memories/${encodeURIComponent(id)}/history`, { query: { limit: 500 } });
  const items = page.items || [];
  fill(box,
    scoreChart(items),
    h("table", { class: "mini history" },
      h("thead", {}, h("tr", {}, ["seq", "when", "change"].map((t) => h("th", {}, t)))),
      h("tbody", {}, items.map((e) => h("tr", { dataset: { change: e.change, seq: String(e.seq) } },
        h("td", { class: "num" }, String(e.seq)),
        h("td", { class: "when" }, short(e.at)),
        h("td", {}, what(e, onOpen),
          e.by ? [" ", h("span", { class: "badge by" }, `by ${e.by}`)] : null,
          e.reason ? h("div", { class: "why muted" }, e.reason) : null))))),
    page.next_offset !== null && page.next_offset !== undefined
      ? h("p", { class: "muted" }, `the first ${items.length} changes`) : null);
}

/** A time as "Dec 3, 09:11" (the year when it is not this one). */
function short(seconds) {
  if (!seconds) return "";
  const d = new Date(seconds * 1000);
  const year = d.getFullYear() === new Date().getFullYear() ? undefined : "numeric";
  return d.toLocaleString(undefined, { year, month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function value(v) {
  return typeof v === "number" ? num(v) : v === null || v === undefined ? "–" : String(v);
}

function what(e, onOpen) {
  if (e.change === "created") {
    return [h("span", { class: "badge" }, "created"), e.redacted ? " (forgotten: text not shown)" : ""];
  }
  if (e.change === "changed") {
    const fields = e.fields || [];
    const moved = fields.filter((f) => f.old !== f.new);  // a field set to what it was says little
    return (moved.length ? moved : fields).map((f, i) => h("span", { class: "field-change", dataset: { field: f.field } },
      i ? "; " : "", `${f.field} ${value(f.old)} → ${value(f.new)}`));
  }
  if (e.change === "related" || e.change === "unrelated") {
    const other = h("button", { type: "button", class: "link", onclick: () => onOpen(e.other) }, e.other);
    return [e.change === "related" ? "related " : "unrelated ",
      e.outgoing ? ["this ", h("span", { class: "badge rel" }, e.rel), " ", other]
        : [other, " ", h("span", { class: "badge rel" }, e.rel), " this"]];
  }
  return h("span", { class: "badge" }, e.change);
}

/** The three scores after each change, as polylines over the change index (0..1 high). */
function scoreChart(items) {
  const now = {};
  const points = [];
  for (const e of items) {
    for (const f of e.fields || []) now[f.field] = f.new;
    points.push({ ...now });
  }
  if (points.length < 2) return null;
  const x = (i) => PAD + (i * (W - 2 * PAD)) / (points.length - 1);
  const y = (v) => PAD + (1 - v) * (H - 2 * PAD);
  const lines = SCORES.map(([name, colour]) => {
    const at = points.map((p, i) => (typeof p[name] === "number" ? `${x(i)},${y(p[name])}` : null))
      .filter(Boolean);
    return at.length ? s("polyline", { points: at.join(" "), stroke: colour, fill: "none", "stroke-width": 2,
      class: "score-line", "data-score": name }) : null;
  });
  return h("figure", { class: "score-chart" },
    s("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "scores over the changes" },
      s("rect", { x: 0, y: 0, width: W, height: H, class: "chart-bg" }), lines),
    h("figcaption", {}, SCORES.map(([name, colour]) =>
      h("span", { class: "legend-item" }, s("svg", { width: 10, height: 10 }, s("rect", { width: 10, height: 10, fill: colour })), ` ${name} `))));
}
