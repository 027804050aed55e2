// Calls to the REST API of the same origin. A 401 asks the person for an API key
// (kept in localStorage, sent as "Authorization: Bearer") and retries; every other
// refusal becomes an ApiError carrying the server's one error shape
// {"error": {"code", "message", "hint"}}.
import { $ } from "./dom.js";

const KEY = "kredenc.apiKey";

export class ApiError extends Error {
  constructor(status, code, message, hint) {
    super(message);
    this.status = status;
    this.code = code;
    this.hint = hint || "";
  }
}

export function apiKey() {
  return localStorage.getItem(KEY) || "";
}

export function forgetKey() {
  localStorage.removeItem(KEY);
  window.dispatchEvent(new Event("kredenc:key"));
}

let pending = null;

/** Ask for a key in the key dialog (one dialog however many calls wait on it). */
export function askKey(reason) {
  if (pending) return pending;
  const dialog = $("#key-dialog");
  const input = $("#key-input");
  $("#key-reason").textContent = reason || "";
  input.value = "";
  pending = new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      pending = null;
      const key = dialog.returnValue === "save" ? input.value.trim() : "";
      if (key) localStorage.setItem(KEY, key);
      window.dispatchEvent(new Event("kredenc:key"));
      resolve(Boolean(key));
    }, { once: true });
  });
  dialog.showModal();
  input.focus();
  return pending;
}

function headers(extra) {
  const out = new Headers(extra || {});
  const key = apiKey();
  if (key) out.set("Authorization", `Bearer ${key}`);
  return out;
}

/** The error a non-2xx response carries, as an ApiError. */
export async function errorOf(response) {
  let detail = null;
  try {
    detail = (await response.json()).error;
  } catch {
    detail = null;
  }
  if (detail && typeof detail.message === "string") {
    return new ApiError(response.status, detail.code, detail.message, detail.hint);
  }
  return new ApiError(response.status, "http_error",
    `the server answered ${response.status} ${response.statusText}`, "");
}

/**
 * fetch() with the key, retried once after a key was typed in when it answers 401.
 * opts: {method, json, form, body, query, accept}. Returns the Response (2xx) or throws.
 */
export async function send(path, opts = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(opts.query || {})) {
    for (const one of Array.isArray(v) ? v : [v]) {
      if (one !== undefined && one !== null && one !== "") url.searchParams.append(k, one);
    }
  }
  for (let attempt = 0; ; attempt++) {
    const extra = { Accept: opts.accept || "application/json" };
    let body = opts.body;
    if (opts.json !== undefined) {
      extra["Content-Type"] = "application/json";
      body = JSON.stringify(opts.json);
    } else if (opts.form !== undefined) {
      body = opts.form;
    }
    let response;
    try {
      response = await fetch(url, { method: opts.method || "GET", headers: headers(extra), body });
    } catch (exc) {
      throw new ApiError(0, "unreachable", "the server did not answer",
        "check that kredenc serve is still running, then try again");
    }
    if (response.status === 401 && attempt < 3) {
      const err = await errorOf(response);
      if (await askKey(err.message)) continue;
      throw err;
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }
}

/** The JSON body of a call (null for 204). */
export async function api(path, opts = {}) {
  const response = await send(path, opts);
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

/**
 * Read a text/event-stream response, calling onEvent(name, data) for each event
 * (data parsed as JSON when it is JSON). Used for POST /ask (EventSource can send
 * neither a body nor the Authorization header) and the ingest job's events.
 */
export async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer += value.replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, cut), onEvent);
      buffer = buffer.slice(cut + 2);
    }
    if (done) break;
  }
  if (buffer.trim()) dispatch(buffer, onEvent);
}

function dispatch(block, onEvent) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return;
  const text = data.join("\n");
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  onEvent(name, parsed);
}

export function isEventStream(response) {
  return (response.headers.get("content-type") || "").startsWith("text/event-stream");
}
