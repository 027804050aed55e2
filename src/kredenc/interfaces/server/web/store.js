// The Store screen: GET /stats, the lifecycle jobs with their last runs (GET /jobs,
// POST /jobs/run) and the store check (GET /check, ?full=true on demand).
import { api } from "./api.js";
import { $, h, fill, facts, when, jsonBlock } from "./dom.js";
import { busy, showError, clearError } from "./ui.js";

export function setup() {
  $("#store-reload").addEventListener("click", () => show());
  $("#check-full").addEventListener("click", (e) => check(e.currentTarget, true));
}

export function show() {
  stats();
  jobs();
  check(null, false);
}

/** A stats value: scalars as text, objects as their own small list. */
function value(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "object") return String(v);
  if (Array.isArray(v)) {
    if (!v.length) return "–";
    if (v.every((x) => x && typeof x === "object" && !Array.isArray(x))) return table(v);
    return v.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(", ");
  }
  return facts(Object.entries(v).map(([k, x]) => [k, value(x)]));
}

/** Rows of objects (e.g. the drawers' counts) as a small table. */
function table(rows) {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  return h("table", { class: "mini" },
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, cols.map((c) => h("td", {}, value(r[c])))))));
}

async function stats() {
  const box = $("#stats");
  try {
    const found = await api("/stats");
    clearError($("#store-error"));
    fill(box, facts(Object.entries(found).map(([k, v]) => [k.replaceAll("_", " "), value(v)])));
  } catch (err) {
    fill(box);
    showError($("#store-error"), err);
  }
}

async function jobs() {
  const rows = $("#job-rows");
  try {
    const found = await api("/jobs");
    fill(rows, (found.items || []).map((job) => h("tr", { dataset: { job: job.name } },
      h("td", {}, job.name),
      h("td", { class: "num" }, job.interval_s ? `${job.interval_s} s` : "–"),
      h("td", {}, when(job.last_run) || "never"),
      h("td", {}, job.last_result === null || job.last_result === undefined ? "–" : jsonBlock(job.last_result)),
      h("td", {}, h("button", { type: "button", onclick: (e) => run(e.currentTarget, job.name) }, "Run now")))));
  } catch (err) {
    fill(rows);
    showError($("#jobs-error"), err);
  }
}

async function run(button, name) {
  await busy(button, $("#jobs-error"), async () => {
    const done = await api("/jobs/run", { method: "POST", json: { names: [name] } });
    fill($("#job-run"), h("h4", {}, `Ran ${name}`), jsonBlock(done.reports || done));
    jobs();
  });
}

async function check(button, full) {
  const box = $("#check");
  await busy(button, $("#check-error"), async () => {
    fill(box, h("p", { class: "muted" }, full ? "running the full check…" : "checking…"));
    const report = await api("/check", { query: { full } });
    const ok = Boolean(report.sound);
    fill(box,
      h("p", { class: `badge check-${ok ? "ok" : "bad"}`, dataset: { ok: String(ok) } },
        ok ? "the store is sound" : "the store check found faults"),
      h("ul", { class: "findings" }, (report.findings || []).map((line) => h("li", {}, line))),
      (report.faults || []).length ? h("ul", { class: "faults" }, report.faults.map((line) => h("li", {}, line))) : null,
      h("details", {}, h("summary", {}, "the whole report"), jsonBlock(report)));
  });
}
