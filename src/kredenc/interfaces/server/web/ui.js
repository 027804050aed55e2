// What several screens share: the error box, the passage dialog, busy buttons.
import { api } from "./api.js";
import { $, h, fill, facts, basename, clock, when, num } from "./dom.js";

/** Show an error (the server's message and hint, as text) in a screen's error box. */
export function showError(box, err) {
  const message = err && err.message ? err.message : String(err);
  fill(box,
    h("strong", { class: "error-message" }, message),
    err && err.hint ? h("span", { class: "error-hint" }, err.hint) : null);
  box.hidden = false;
}

export function clearError(box) {
  fill(box);
  box.hidden = true;
}

/** Run fn while the button is disabled; errors go to the box. */
export async function busy(button, box, fn) {
  if (button) button.disabled = true;
  if (box) clearError(box);
  try {
    return await fn();
  } catch (err) {
    if (box) showError(box, err);
    else throw err;
  } finally {
    if (button) button.disabled = false;
  }
}

/** Where a passage came from: file and page, or a time in a recording. */
export function place(item) {
  const parts = [];
  const file = item.title || basename(item.origin);
  if (file) parts.push(file);
  if (item.page !== null && item.page !== undefined) parts.push(`page ${item.page}`);
  if (item.start_s !== null && item.start_s !== undefined) parts.push(`at ${clock(item.start_s)}`);
  return parts.join(", ");
}

/** Open one record (GET /records/{id}) in the passage dialog. */
export async function openPassage(id) {
  const dialog = $("#passage-dialog");
  const body = $("#passage-body");
  const box = $("#passage-error");
  fill(body, h("p", { class: "muted" }, "loading…"));
  if (!dialog.open) dialog.showModal();
  try {
    const found = await api(`/records/${encodeURIComponent(id)}`);
    const record = found.record || {};
    const prov = found.provenance || {};
    clearError(box);
    fill(body,
      h("p", { class: "passage-place" }, place({ ...record.meta, ...prov }) || record.id),
      facts([
        ["id", record.id],
        ["kind", record.kind],
        ["drawer", record.drawer],
        ["filed", when(record.created_at)],
        ["confidence", num(record.confidence)],
        ...Object.entries(prov).filter(([, v]) => v !== null && typeof v !== "object")
          .map(([k, v]) => [k.replaceAll("_", " "), String(v)]),
      ]),
      h("blockquote", { class: "passage-text" }, record.text || ""));
  } catch (err) {
    fill(body);
    showError(box, err);
  }
}
