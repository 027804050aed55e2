// The Memories screen: browse and filter (GET /memories), open one (its scores, its
// relations from GET /relationships/{id}, its history of changes from GET
// /memories/{id}/history, history.js), edit its scores (PATCH),
// relate it (POST /relationships), forget it (DELETE), and the context graph around a
// query or a memory (GET /context_graph) drawn as SVG.
import { api } from "./api.js";
import { $, h, fill, facts, num, when } from "./dom.js";
import { busy, showError, clearError } from "./ui.js";
import { showGraph } from "./graph.js";
import { showHistory } from "./history.js";

export const KINDS = ["fact", "concept", "task", "event", "decision", "skill", "preference", "note"];
export const STATUSES = ["unvalidated", "validated", "disputed", "deprecated"];
export const RELATIONS = ["supports", "contradicts", "depends_on", "derived_from", "related_to", "precedes", "follows"];
const PAGE = 25;
let offset = 0;

const list = (value) => value.split(",").map((v) => v.trim()).filter(Boolean);

export function setup() {
  const kind = $("#f-kind"), status = $("#f-status"), rel = $("#rel-type"), newKind = $("#new-kind");
  for (const k of KINDS) { kind.append(h("option", { value: k }, k)); newKind.append(h("option", { value: k }, k)); }
  newKind.value = "note";
  for (const st of STATUSES) status.append(h("option", { value: st }, st));
  for (const r of RELATIONS) rel.append(h("option", { value: r }, r));
  $("#mem-filter").addEventListener("submit", (e) => { e.preventDefault(); offset = 0; browse(); });
  $("#mem-prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); browse(); });
  $("#mem-next").addEventListener("click", (e) => { offset = Number(e.currentTarget.dataset.next || 0); browse(); });
  $("#graph-form").addEventListener("submit", (e) => {
    e.preventDefault();
    graph(e.submitter, { query: $("#graph-query").value.trim(), max_hops: $("#graph-hops").value });
  });
  $("#new-form").addEventListener("submit", (e) => { e.preventDefault(); create(e.submitter); });
}

export function show(id) {
  browse();
  if (id) open(id);
}

function query() {
  const pick = (sel) => [...$(sel).selectedOptions].map((o) => o.value);
  return {
    kind: pick("#f-kind"), status: pick("#f-status"), tag: list($("#f-tag").value),
    drawer: $("#f-drawer").value.trim(), since: $("#f-since").value, until: $("#f-until").value,
    user_id: $("#f-user").value.trim(), limit: PAGE, offset,
  };
}

/** Whose memory it is: its user_id (empty when none), the field the User filter sends. */
export function userOf(m) {
  return String(m.user_id || "");
}

async function browse() {
  const box = $("#mem-error");
  const rows = $("#mem-rows");
  try {
    const page = await api("/memories", { query: query() });
    clearError(box);
    const items = page.items || [];  // filtered by the server (user_id and the rest)
    fill(rows, items.length ? items.map((m) => h("tr", {
      dataset: { id: m.id }, tabindex: 0, onclick: () => open(m.id),
      onkeydown: (e) => { if (e.key === "Enter") open(m.id); },
    },
      h("td", {}, h("span", { class: "badge kind", dataset: { kind: m.kind } }, m.kind)),
      h("td", { class: "mem-text" }, (m.text || "").slice(0, 160)),
      h("td", {}, m.status),
      h("td", { class: "num" }, num(m.importance)),
      h("td", { class: "num" }, num(m.confidence)),
      h("td", {}, (m.tags || []).join(", ")),
      h("td", {}, userOf(m)),
      h("td", {}, when(m.created_at))))
      : h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No memories match.")));
    $("#mem-prev").disabled = offset === 0;
    const next = $("#mem-next");
    next.disabled = page.next_offset === null || page.next_offset === undefined;
    next.dataset.next = String(page.next_offset ?? "");
    $("#mem-page").textContent = `${offset + 1}–${offset + (page.items || []).length}`;
  } catch (err) {
    fill(rows);
    showError(box, err);
  }
}

async function create(button) {
  await busy(button, $("#new-error"), async () => {
    const text = $("#new-text").value.trim();
    if (!text) throw { message: "type the memory's text first", hint: "" };
    const m = await api("/memories", {
      method: "POST", json: { text, kind: $("#new-kind").value, tags: list($("#new-tags").value) },
    });
    $("#new-text").value = "";
    browse();
    open(m.id);
  });
}

/** Open one memory in the detail card. */
export async function open(id) {
  const card = $("#mem-detail");
  const box = $("#detail-error");
  card.hidden = false;
  card.dataset.id = id;
  // Nothing of the memory shown before stays actionable while this one loads.
  fill($("#detail-body"), h("p", { class: "muted" }, "loading…"));
  fill($("#relations"));
  fill($("#mem-history"));
  $("#score-form").onsubmit = (e) => e.preventDefault();
  $("#relate-form").onsubmit = (e) => e.preventDefault();
  $("#forget").onclick = null;
  if (location.hash !== `#memories/${id}`) history.replaceState(null, "", `#memories/${encodeURIComponent(id)}`);
  try {
    const m = await api(`/memories/${encodeURIComponent(id)}`);
    clearError(box);
    renderDetail(m);
    relations(m.id);
    changes(m.id);
    graph(null, { seed_ids: m.id, query: (m.text || "").slice(0, 200), max_hops: $("#graph-hops").value });
  } catch (err) {
    fill($("#detail-body"));
    showError(box, err);
  }
}

function renderDetail(m) {
  fill($("#detail-body"),
    h("header", { class: "detail-head" },
      h("span", { class: "badge kind", dataset: { kind: m.kind } }, m.kind),
      h("span", { class: "badge" }, m.status),
      m.read_only ? h("span", { class: "badge" }, "read-only") : null,
      h("code", { class: "mem-id" }, m.id)),
    h("p", { class: "mem-full-text" }, m.text || ""),
    h("h4", {}, "Scores"),
    facts([["importance", num(m.importance)], ["confidence", num(m.confidence)], ["stability", num(m.stability)]]),
    h("h4", {}, "Details"),
    facts([
      ["filed", when(m.created_at)], ["source", m.source], ["user", userOf(m)], ["drawer", m.drawer],
      ["tags", (m.tags || []).join(", ")], ["valid from", when(m.valid_from)], ["valid to", when(m.valid_to)],
      ["episode", m.episode_id], ["task status", m.task_status], ["log position", `seq ${m.seq}`],
    ]));
  $("#s-importance").value = m.importance;
  $("#s-confidence").value = m.confidence;
  $("#s-stability").value = m.stability;
  fill($("#s-status"), STATUSES.map((st) => h("option", { value: st }, st)));
  $("#s-status").value = m.status;
  $("#score-form").onsubmit = (e) => { e.preventDefault(); rescore(e.submitter, m); };
  $("#relate-form").onsubmit = (e) => { e.preventDefault(); relate(e.submitter, m.id); };
  $("#forget").onclick = (e) => forget(e.currentTarget, m.id);
}

async function relations(id) {
  const ul = $("#relations");
  try {
    const found = await api(`/relationships/${encodeURIComponent(id)}`);
    const items = found.items || [];
    fill(ul, items.length ? items.map((e) => {
      const other = e.src === id ? e.dst : e.src;
      return h("li", { dataset: { rel: e.rel } },
        e.src === id ? "this " : "",
        h("span", { class: "badge rel" }, e.rel), " ",
        h("button", { type: "button", class: "link", onclick: () => open(other) }, other),
        e.src === id ? "" : " → this", ` (weight ${num(e.weight)})`);
    }) : h("li", { class: "muted" }, "No relations."));
  } catch (err) {
    fill(ul);
    showError($("#detail-error"), err);
  }
}

async function changes(id) {
  try {
    await showHistory($("#mem-history"), id, open);
  } catch (err) {
    fill($("#mem-history"));
    showError($("#detail-error"), err);
  }
}

/** Save the fields the form changed (only those: the memory's history shows each edit). */
async function rescore(button, m) {
  const id = m.id;
  await busy(button, $("#detail-error"), async () => {
    const form = {
      importance: Number($("#s-importance").value), confidence: Number($("#s-confidence").value),
      stability: Number($("#s-stability").value), status: $("#s-status").value,
    };
    const body = Object.fromEntries(Object.entries(form).filter(([k, v]) => v !== m[k]));
    if (!Object.keys(body).length) throw { message: "nothing to change", hint: "change a score or the status first" };
    const reason = $("#s-reason").value.trim();
    if (reason) body.reason = reason;
    renderDetail(await api(`/memories/${encodeURIComponent(id)}`, { method: "PATCH", json: body }));
    $("#s-reason").value = "";
    changes(id);
    browse();
  });
}

async function relate(button, id) {
  await busy(button, $("#detail-error"), async () => {
    const dst = $("#rel-dst").value.trim();
    if (!dst) throw { message: "give the id of the other memory", hint: "open it in the list to see its id" };
    const weight = Number($("#rel-weight").value || 1);
    await api("/relationships", { method: "POST", json: { src: id, dst, rel: $("#rel-type").value, weight } });
    $("#rel-dst").value = "";
    relations(id);
    changes(id);
  });
}

async function forget(button, id) {
  if (!confirm("Forget this memory? It leaves search and recall at once.")) return;
  await busy(button, $("#detail-error"), async () => {
    await api(`/memories/${encodeURIComponent(id)}`, { method: "DELETE" });
    $("#mem-detail").hidden = true;
    history.replaceState(null, "", "#memories");
    browse();
  });
}

async function graph(button, params) {
  const box = $("#graph-box");
  await busy(button, $("#graph-error"), async () => {
    if (!params.query && !params.seed_ids) throw { message: "type a query for the graph", hint: "" };
    const found = await api("/context_graph", { query: params });
    $("#graph-title").textContent = params.seed_ids ? `Around ${params.seed_ids}` : `Around “${params.query}”`;
    showGraph(box, found, open);
  });
}
