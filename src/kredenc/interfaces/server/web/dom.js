// Building the page's elements. Data is only ever written as text (text nodes,
// textContent, attribute values): memories and documents are hostile input, and the
// page never parses a string as markup (no innerHTML anywhere in these modules).

/** An element: h("div", {class: "x", onclick: fn}, "text", child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element (the graph), with the same rules. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "value" && "value" in el) {
      el.value = String(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

/** Append children: strings and numbers as text nodes, arrays flattened, null skipped. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export const $ = (selector, root = document) => root.querySelector(selector);

/** A time (seconds since the epoch) as a short local date and time, or "". */
export function when(seconds) {
  if (!seconds) return "";
  const d = new Date(seconds * 1000);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** A position in audio or video (seconds) as m:ss or h:mm:ss. */
export function clock(seconds) {
  const t = Math.max(0, Math.floor(seconds));
  const hh = Math.floor(t / 3600), mm = Math.floor((t % 3600) / 60), ss = t % 60;
  const two = (n) => String(n).padStart(2, "0");
  return hh ? `${hh}:${two(mm)}:${two(ss)}` : `${mm}:${two(ss)}`;
}

export function num(value, digits = 2) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "–";
}

/** The last part of a path or URL: what a person calls the file. */
export function basename(origin) {
  if (!origin) return "";
  const clean = String(origin).split(/[?#]/)[0].replace(/\/+$/, "");
  return clean.slice(clean.lastIndexOf("/") + 1) || String(origin);
}

/** A definition list from [label, value] pairs (values as text or nodes). */
export function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/** Any JSON value as indented text in a <pre>. */
export function jsonBlock(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}
