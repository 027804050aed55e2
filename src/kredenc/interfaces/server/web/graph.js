// The context graph as SVG: a radial layout (seeds in the middle, each hop one ring
// further out, nodes spaced evenly on their ring), nodes coloured by kind and edges
// labelled with their relation. Small and written here on purpose: no layout library
// to vendor for the few dozen nodes a context graph holds (neighbors_max bounds it).
import { h, s, fill } from "./dom.js";

const PALETTE = ["#2f6fdf", "#d9822b", "#3a9a5b", "#b8429b", "#7a5cc7", "#c0392b", "#16a2a8", "#8a8f3a"];
const FIXED = { note: 0, chunk: 1, fact: 2, preference: 3, event: 4, turn: 5, document: 6, task: 7 };

export function colour(kind) {
  if (kind in FIXED) return PALETTE[FIXED[kind]];
  let hash = 0;
  for (const ch of String(kind)) hash = (hash * 31 + ch.codePointAt(0)) >>> 0;
  return PALETTE[hash % PALETTE.length];
}

/** Positions {id: [x, y]} for the nodes around (0, 0). */
export function layout(nodes) {
  const rings = new Map();
  for (const node of nodes) {
    const hop = Math.max(0, node.hop || 0);
    if (!rings.has(hop)) rings.set(hop, []);
    rings.get(hop).push(node);
  }
  const at = {};
  for (const [hop, ring] of rings) {
    const radius = ring.length === 1 && hop === 0 ? 0 : 90 + hop * 120;
    ring.forEach((node, i) => {
      const angle = (2 * Math.PI * i) / ring.length + hop * 0.4;
      at[node.id] = [radius * Math.cos(angle), radius * Math.sin(angle)];
    });
  }
  return at;
}

/** An <svg> of the graph; onOpen(id) when a node is clicked. */
export function drawGraph(graph, onOpen) {
  const nodes = graph.nodes || [];
  const known = new Set(nodes.map((n) => n.id));
  const edges = (graph.edges || []).filter((e) => known.has(e.src) && known.has(e.dst));
  const at = layout(nodes);
  const xs = Object.values(at).map((p) => p[0]);
  const ys = Object.values(at).map((p) => p[1]);
  // The drawing's box: the nodes plus room for their labels, never smaller than a
  // usual card (a graph of two nodes is not blown up to fill the screen).
  const pad = 140;
  const cx = (Math.min(...xs) + Math.max(...xs)) / 2, cy = (Math.min(...ys) + Math.max(...ys)) / 2;
  const width = Math.max(760, Math.max(...xs) - Math.min(...xs) + 2 * pad);
  const height = Math.max(420, Math.max(...ys) - Math.min(...ys) + pad);
  const minX = cx - width / 2, minY = cy - height / 2, maxX = minX + width, maxY = minY + height;
  const svg = s("svg", {
    class: "graph", role: "img", "aria-label": `context graph for ${graph.query || "the seeds"}`,
    viewBox: `${minX} ${minY} ${maxX - minX} ${maxY - minY}`,
  });
  svg.append(s("defs", {}, s("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 20, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse",
  }, s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }))));
  for (const edge of edges) {
    const [x1, y1] = at[edge.src], [x2, y2] = at[edge.dst];
    svg.append(s("g", { class: "edge", dataset: { rel: edge.rel } },
      s("line", { x1, y1, x2, y2, "marker-end": "url(#arrow)" }),
      s("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, class: "edge-label" }, edge.rel)));
  }
  for (const node of nodes) {
    const [x, y] = at[node.id];
    const label = (node.text || node.id).slice(0, 28) + ((node.text || "").length > 28 ? "…" : "");
    svg.append(s("g", {
      class: "node", dataset: { id: node.id, kind: node.kind || node.type }, transform: `translate(${x} ${y})`,
      tabindex: 0, onclick: () => onOpen && onOpen(node.id),
      onkeydown: (e) => { if (e.key === "Enter" && onOpen) onOpen(node.id); },
    },
      s("title", {}, `${node.kind || node.type} · score ${Number(node.score || 0).toFixed(3)} · hop ${node.hop}\n${node.text || ""}`),
      s("circle", { r: node.hop ? 11 : 15, fill: colour(node.kind || node.type) }),
      s("text", { y: 28, class: "node-label" }, label)));
  }
  return svg;
}

/** The colours in use, as a legend. */
export function legend(graph) {
  const kinds = [...new Set((graph.nodes || []).map((n) => n.kind || n.type))];
  return h("ul", { class: "legend" }, kinds.map((k) =>
    h("li", {}, h("span", { class: "swatch", dataset: { kind: k } }, ""), k)));
}

/** Colour the legend's swatches (a style attribute set from script is not inline CSS
 * in the CSP sense: the CSP's style-src governs <style> and style="" in markup). */
export function paintLegend(root) {
  for (const sw of root.querySelectorAll(".swatch")) sw.style.background = colour(sw.dataset.kind);
}

export function showGraph(box, graph, onOpen) {
  if (!(graph.nodes || []).length) return fill(box, h("p", { class: "muted" }, "Nothing in the graph for this query."));
  fill(box, drawGraph(graph, onOpen), legend(graph));
  paintLegend(box);
}
