// The Ingest screen: files (dropped or picked) as multipart POST /ingest, URLs (web
// pages, YouTube links) as POST /ingest {urls}; then the job's events
// (GET /ingest/jobs/{id}/events): progress per file and page, each file's outcome,
// and the summary when it is done. Without the event stream it polls the job.
import { api, send, readEvents, isEventStream } from "./api.js";
import { $, h, fill, basename, when, num } from "./dom.js";
import { busy, showError } from "./ui.js";

export function setup() {
  const drop = $("#drop-zone");
  const picker = $("#file-input");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer && e.dataTransfer.files.length) upload(e.dataTransfer.files);
  });
  drop.addEventListener("click", () => picker.click());
  drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") picker.click(); });
  picker.addEventListener("change", () => {
    if (picker.files.length) upload(picker.files);
    picker.value = "";
  });
  $("#url-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const urls = $("#url-input").value.split(/\s+/).map((u) => u.trim()).filter(Boolean);
    if (!urls.length) return showError($("#ingest-error"), { message: "paste at least one URL", hint: "" });
    start(e.submitter, { json: { urls } });
  });
  $("#jobs-reload").addEventListener("click", () => listJobs());
}

export function show() {
  listJobs();
}

function upload(files) {
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  start($("#url-submit"), { form });
}

async function start(button, payload) {
  await busy(button, $("#ingest-error"), async () => {
    const found = await api("/ingest", { method: "POST", ...payload });
    if (payload.json) $("#url-input").value = "";
    await follow(found.job);
  });
}

/** One card per job, one row per source, updated from the job's events. */
function jobCard(job) {
  const card = h("section", { class: "card job", dataset: { job: job.id, state: job.state } },
    h("header", {}, h("h3", {}, `Job ${job.id}`), h("span", { class: "badge job-state" }, job.state)),
    h("table", { class: "sources-progress" },
      h("thead", {}, h("tr", {}, ["source", "progress", "outcome"].map((t) => h("th", {}, t)))),
      h("tbody", {})),
    h("div", { class: "job-summary" }));
  $("#jobs").prepend(card);
  for (const source of job.sources || []) row(card, source);
  return card;
}

function row(card, source) {
  const tbody = card.querySelector("tbody");
  for (const tr of tbody.children) if (tr.dataset.source === source) return tr;
  const tr = h("tr", { dataset: { source } },
    h("td", { title: source }, basename(source)),
    h("td", {}, h("progress", { max: 1, value: 0 }), h("span", { class: "pages" }, "")),
    h("td", { class: "outcome" }, "waiting"));
  tbody.append(tr);
  return tr;
}

function progress(card, ev) {
  const tr = row(card, ev.source);
  const bar = tr.querySelector("progress");
  const pages = ev.pages || 0;
  if (pages) { bar.max = pages; bar.value = ev.page || 0; }
  tr.querySelector(".pages").textContent = pages ? ` page ${ev.page} of ${pages}` : "";
  if (tr.querySelector(".outcome").textContent === "waiting") tr.querySelector(".outcome").textContent = "reading";
}

function outcome(card, file) {
  const tr = row(card, file.source);
  const bar = tr.querySelector("progress");
  bar.value = bar.max;
  if (bar.max > 1) tr.querySelector(".pages").textContent = ` ${bar.max} pages`;
  fill(tr.querySelector(".outcome"),
    h("span", { class: `badge outcome-${file.status}` }, file.status),
    file.chunks ? ` ${file.chunks} chunks` : "",
    file.error ? h("span", { class: "error-hint" }, ` ${file.error}`) : null);
}

function finish(card, job) {
  card.dataset.state = job.state;
  card.querySelector(".job-state").textContent = job.state;
  for (const [source, p] of Object.entries(job.progress || {})) progress(card, { source, ...p });
  const report = job.report;
  if (report) for (const file of report.files || []) outcome(card, file);
  fill(card.querySelector(".job-summary"),
    report ? h("p", {}, `${report.documents} document(s), ${report.chunks} chunk(s), ${report.unchanged} unchanged, `
      + `${report.replaced} replaced, ${(report.failed || []).length} failed, ${(report.skipped || []).length} skipped`
      + ` in ${num(report.seconds, 1)} s`) : null,
    job.error ? h("p", { class: "error" }, h("strong", {}, job.error.message || ""), " ", h("span", { class: "error-hint" }, job.error.hint || "")) : null,
    job.finished_at ? h("p", { class: "muted" }, `finished ${when(job.finished_at)}`) : null);
}

async function follow(job) {
  try {
    await watch(job);
  } finally {
    listJobs();
  }
}

async function watch(job) {
  const card = jobCard(job);
  if (job.state === "done" || job.state === "failed") return finish(card, job);
  try {
    const response = await send(`/ingest/jobs/${encodeURIComponent(job.id)}/events`, { accept: "text/event-stream" });
    if (isEventStream(response)) {
      let last = null;
      await readEvents(response, (name, data) => {
        if (name === "progress") progress(card, data);
        else if (name === "file") outcome(card, data);
        else if (name === "done" || name === "failed") last = data;
      });
      if (last) return finish(card, last);
    }
  } catch (err) {
    // No event stream (or it broke): poll the job instead.
  }
  for (;;) {
    const now = await api(`/ingest/jobs/${encodeURIComponent(job.id)}`);
    for (const [source, p] of Object.entries(now.progress || {})) progress(card, { source, ...p });
    if (now.state === "done" || now.state === "failed") return finish(card, now);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function listJobs() {
  try {
    const found = await api("/ingest/jobs");
    const list = $("#job-list");
    fill(list, (found.items || []).map((job) => h("li", {},
      h("span", { class: "badge" }, job.state), ` ${job.id}: `,
      (job.sources || []).map(basename).join(", "), " ", h("span", { class: "muted" }, when(job.created_at)))));
  } catch (err) {
    showError($("#ingest-error"), err);
  }
}
