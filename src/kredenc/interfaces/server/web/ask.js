// The Ask screen: POST /ask (streamed as server-sent events when the server does),
// the answer with its numbered citations, the judge's confidence card, the retrieval
// mode, the sources (each opening its passage), the trace, and the session's history.
import { send, api, readEvents, isEventStream } from "./api.js";
import { $, h, fill, num, when } from "./dom.js";
import { busy, showError, clearError, openPassage, place } from "./ui.js";

const SESSION = "kredenc.session";

/** The judge's band as a colour: green ≥ 70, amber 40–69, red < 40. */
export function band(score) {
  if (score >= 70) return "green";
  if (score >= 40) return "amber";
  return "red";
}

export function setup() {
  const session = $("#ask-session");
  session.value = localStorage.getItem(SESSION) || `web-${Math.random().toString(36).slice(2, 10)}`;
  localStorage.setItem(SESSION, session.value);
  session.addEventListener("change", () => {
    localStorage.setItem(SESSION, session.value.trim());
    loadHistory();
  });
  $("#ask-form").addEventListener("submit", (event) => {
    event.preventDefault();
    ask(event.submitter);
  });
  $("#history-clear").addEventListener("click", (event) => clearHistory(event.currentTarget));
  $("#history-reload").addEventListener("click", () => loadHistory());
}

export function show() {
  loadHistory();
}

async function ask(button) {
  const question = $("#ask-question").value.trim();
  const box = $("#ask-error");
  if (!question) {
    showError(box, { message: "type a question first", hint: "" });
    return;
  }
  const body = { question, session_id: $("#ask-session").value.trim() || null };
  const stream = $("#ask-stream").checked;
  const out = $("#ask-result");
  const live = h("p", { class: "answer-text streaming" });
  const steps = h("ol", { class: "live-steps" });
  fill(out, h("section", { class: "card" }, h("h3", {}, "Answer"), live, steps));
  out.dataset.state = "running";
  delete out.dataset.streamed;
  await busy(button, box, async () => {
    try {
      const response = await send("/ask", {
        method: "POST",
        json: { ...body, stream },
        accept: stream ? "text/event-stream" : "application/json",
      });
      if (!isEventStream(response)) {
        render(await response.json());
        return;
      }
      let finished = false;
      out.dataset.streamed = "true";
      await readEvents(response, (name, data) => {
        if (name === "delta") live.append(document.createTextNode(data.text || ""));
        else if (name === "step") steps.append(h("li", {}, `${data.tool} ${data.status} ${num(data.ms, 0)} ms`));
        else if (name === "answer") { finished = true; render(data); }
        else if (name === "error") { finished = true; throw data.error || data; }
      });
      if (!finished) throw { message: "the answer stream ended early", hint: "ask again" };
    } finally {
      if (out.dataset.state === "running") out.dataset.state = "failed";
      loadHistory();
    }
  });
}

/** The answer's text with each [n] as a button opening source n. */
function answerText(answer) {
  const byN = new Map((answer.citations || []).map((c) => [c.n, c]));
  const p = h("p", { class: "answer-text" });
  const text = answer.text || "";
  let last = 0;
  for (const m of text.matchAll(/\[(\d+)\]/g)) {
    p.append(document.createTextNode(text.slice(last, m.index)));
    const cite = byN.get(Number(m[1]));
    p.append(cite
      ? h("button", { type: "button", class: "cite", title: place(cite), onclick: () => openPassage(cite.id) }, `[${m[1]}]`)
      : document.createTextNode(m[0]));
    last = m.index + m[0].length;
  }
  p.append(document.createTextNode(text.slice(last)));
  return p;
}

function confidenceCard(ev) {
  if (!ev) return h("section", { class: "card confidence", dataset: { band: "none" } }, "not judged");
  const colour = band(ev.confidence_score);
  return h("section", { class: `card confidence band-${colour}`, dataset: { band: colour } },
    h("div", { class: "confidence-score" }, String(ev.confidence_score)),
    h("div", {},
      h("h3", {}, `Confidence ${ev.confidence_score}/100`),
      h("p", {}, ev.evaluation_summary || ""),
      h("p", { class: "hallucination", dataset: { detected: String(Boolean(ev.hallucination_detected)) } },
        ev.hallucination_detected
          ? `Hallucination detected: ${ev.hallucination_reason || "no reason given"}`
          : "No hallucination detected"),
      h("p", { class: "muted" }, ev.context_sufficient ? "the context was sufficient" : "the context was not sufficient")));
}

function sources(answer) {
  const cites = answer.citations || [];
  if (!cites.length) return h("p", { class: "muted" }, "No sources.");
  return h("ol", { class: "sources" }, cites.map((c) =>
    h("li", { value: c.n },
      h("button", { type: "button", class: "source", onclick: () => openPassage(c.id) },
        h("span", { class: "source-place" }, place(c) || c.id),
        h("span", { class: "source-score" }, `score ${num(c.score, 3)}`)),
      h("p", { class: "source-text" }, (c.text || "").slice(0, 300)))));
}

function trace(answer) {
  const rows = (answer.trace || []).map((st) => h("tr", {},
    h("td", {}, String(st.iteration)), h("td", {}, st.tool), h("td", {}, st.status),
    h("td", { class: "num" }, num(st.ms, 1)), h("td", {}, st.note || "")));
  const total = (answer.trace || []).reduce((sum, st) => sum + (st.ms || 0), 0);
  return h("details", { class: "trace" },
    h("summary", {}, `${answer.iterations} iteration(s), ${rows.length} steps, ${num(total, 0)} ms`),
    h("table", {}, h("thead", {}, h("tr", {}, ["iteration", "tool", "status", "ms", "note"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)),
    (answer.gaps || []).length ? h("p", {}, `Gaps: ${answer.gaps.join("; ")}`) : null,
    answer.standalone_query ? h("p", { class: "muted" }, `Searched as: ${answer.standalone_query}`) : null);
}

export function render(answer) {
  const out = $("#ask-result");
  fill(out,
    h("section", { class: "card answer" },
      h("header", { class: "answer-head" },
        h("h3", {}, "Answer"),
        h("span", { class: `badge mode mode-${answer.mode}`, title: "retrieval mode" }, answer.mode || "none")),
      answerText(answer)),
    confidenceCard(answer.evaluation),
    h("section", { class: "card" }, h("h3", {}, "Sources"), sources(answer)),
    trace(answer));
  out.dataset.state = "done";
}

async function loadHistory() {
  const id = $("#ask-session").value.trim();
  const list = $("#history");
  const box = $("#history-error");
  if (!id) return fill(list);
  try {
    const found = await api(`/sessions/${encodeURIComponent(id)}`, { query: { limit: 20 } });
    clearError(box);
    const messages = found.messages || [];
    fill(list, messages.length
      ? messages.map((m) => h("li", { class: `msg msg-${m.role}` }, h("span", { class: "role" }, m.role), h("span", {}, m.content)))
      : h("li", { class: "muted" }, "No messages in this session yet."));
  } catch (err) {
    if (err.status === 404) fill(list, h("li", { class: "muted" }, "No messages in this session yet."));
    else { fill(list); showError(box, err); }
  }
}

async function clearHistory(button) {
  const id = $("#ask-session").value.trim();
  if (!id) return;
  await busy(button, $("#history-error"), async () => {
    const done = await api(`/sessions/${encodeURIComponent(id)}`, { method: "DELETE" });
    fill($("#history"), h("li", { class: "muted" }, `Cleared ${done ? done.cleared : 0} message(s) at ${when(Date.now() / 1000)}.`));
  });
}
