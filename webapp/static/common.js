// Shared by the privrec pages (index.html with app.js: local and central
// collection; dap.html with dap.js: two aggregators): storage, the
// server calls, the calls into the WebAssembly device code (the global
// object privrec), the rating form and starting the module.
"use strict";

const $ = (id) => document.getElementById(id);

function load(key, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : JSON.parse(v);
  } catch (e) {
    return fallback;
  }
}
function save(key, v) { localStorage.setItem(key, JSON.stringify(v)); }

function status(text, bad) {
  const s = $("status");
  s.textContent = text;
  s.className = bad ? "bad" : "";
}

function fmt(x) {
  return Number.isInteger(x) ? String(x) : String(Math.round(x * 1000) / 1000);
}

// api calls the server; a non-2xx answer throws an Error carrying the
// server's message and status.
async function api(method, path, body, token, contentType) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = contentType || "application/json";
  if (token) headers["Authorization"] = "Bearer " + token;
  const resp = await fetch(path, { method, headers, body, cache: "no-store", credentials: "omit" });
  const text = await resp.text();
  if (!resp.ok) {
    let msg = text;
    try { msg = JSON.parse(text).error || text; } catch (e) { /* not JSON */ }
    const err = new Error(msg + " (HTTP " + resp.status + ")");
    err.status = resp.status;
    throw err;
  }
  return text;
}

// device calls the WebAssembly device code, which answers JSON.
function device(fn, ...args) {
  const out = JSON.parse(privrec[fn](...args));
  if (out.error) throw new Error(out.error);
  return out;
}

// ratingValues lists the values a person can choose on the declared scale.
function ratingValues(sc) {
  const vals = [];
  if (sc.levels >= 2) {
    const step = (sc.max - sc.min) / (sc.levels - 1);
    for (let k = 0; k < sc.levels; k++) vals.push(sc.min + k * step);
  } else {
    for (let v = Math.ceil(sc.min); v <= Math.floor(sc.max) && vals.length < 21; v++) vals.push(v);
  }
  return vals;
}

// fmtDelta prints δ as the device code does (client.FormatDelta): 1e-6.
function fmtDelta(x) {
  return x !== 0 && x < 1e-3 ? x.toExponential() : String(x);
}

function fmtBig(x) {
  return x < 10 ? x.toFixed(1) : x < 1e6 ? String(Math.round(x)) : x.toExponential(1);
}

function itemTitle(it) { return it.title || it.id; }

// drawRatings draws the rating form (#ratings) over items, offering
// vals; her ratings are kept in localStorage under key.
function drawRatings(items, vals, key) {
  const form = $("ratings");
  const mine = load(key, {});
  form.textContent = "";
  form.dataset.key = key;
  form.dataset.total = String(items.length);
  items.forEach((it, j) => {
    const row = document.createElement("div");
    row.className = "item";
    row.dataset.title = itemTitle(it).toLowerCase();
    const id = "rate-" + j;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = itemTitle(it);
    const sel = document.createElement("select");
    sel.id = id;
    sel.dataset.item = it.id;
    const none = document.createElement("option");
    none.value = "";
    none.textContent = "not rated";
    sel.appendChild(none);
    for (const v of vals) {
      const o = document.createElement("option");
      o.value = String(v);
      o.textContent = fmt(v) + (v === vals[0] ? " (worst)" : v === vals[vals.length - 1] ? " (best)" : "");
      sel.appendChild(o);
    }
    if (mine[it.id] !== undefined) sel.value = String(mine[it.id]);
    sel.addEventListener("change", onRate);
    row.append(label, sel);
    form.appendChild(row);
  });
  countRatings();
}

function onRate(ev) {
  const key = $("ratings").dataset.key;
  const mine = load(key, {});
  const sel = ev.target;
  if (sel.value === "") delete mine[sel.dataset.item];
  else mine[sel.dataset.item] = Number(sel.value);
  save(key, mine);
  countRatings();
}

function countRatings() {
  const f = $("ratings");
  const n = Object.keys(load(f.dataset.key, {})).length;
  $("rated-count").textContent = "You have rated " + n + " of " + f.dataset.total + " items (saved in this browser only).";
}

function onFilter() {
  const q = $("filter").value.trim().toLowerCase();
  for (const row of $("ratings").children) row.hidden = q !== "" && !row.dataset.title.includes(q);
}

async function startWasm() {
  const go = new Go();
  const ready = new Promise((resolve) => { window.privrecReady = resolve; });
  let inst;
  if (WebAssembly.instantiateStreaming) {
    inst = await WebAssembly.instantiateStreaming(fetch("privrec.wasm"), go.importObject);
  } else {
    const buf = await (await fetch("privrec.wasm")).arrayBuffer();
    inst = await WebAssembly.instantiate(buf, go.importObject);
  }
  go.run(inst.instance); // runs until the page goes away
  await ready;
}

