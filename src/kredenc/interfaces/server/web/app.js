// The page's entry point: one screen at a time, chosen by the URL's hash
// (#ask, #ingest, #memories, #memories/<id>, #store), and the header's key controls.
import { apiKey, askKey, forgetKey } from "./api.js";
import { $ } from "./dom.js";
import * as ask from "./ask.js";
import * as ingest from "./ingest.js";
import * as memories from "./memories.js";
import * as store from "./store.js";

const SCREENS = { ask, ingest, memories, store };

function route() {
  const [name, ...rest] = location.hash.replace(/^#/, "").split("/");
  const screen = name in SCREENS ? name : "ask";
  for (const section of document.querySelectorAll("main > section[data-screen]")) {
    section.hidden = section.dataset.screen !== screen;
  }
  for (const link of document.querySelectorAll("nav a[data-screen]")) {
    if (link.dataset.screen === screen) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : undefined;
  SCREENS[screen].show(arg);
}

function keyButtons() {
  $("#key-state").textContent = apiKey() ? "key set" : "no key";
}

function start() {
  for (const screen of Object.values(SCREENS)) screen.setup();
  $("#key-change").addEventListener("click", async () => { if (await askKey("Type the API key to use.")) route(); });
  $("#key-forget").addEventListener("click", () => forgetKey());
  window.addEventListener("kredenc:key", keyButtons);
  $("#passage-close").addEventListener("click", () => $("#passage-dialog").close());
  window.addEventListener("hashchange", route);
  keyButtons();
  route();
  document.body.dataset.ready = "true";
}

start();
