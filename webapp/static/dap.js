// The privrec browser device of the two-aggregator path (docs/AGGREGATION.md).
// The device code is Go compiled to WebAssembly (privrec.wasm, the global
// object privrec; the dap… functions are package dap, the reference
// client's code): it checks each task, computes her contribution from her
// ratings with the task's public plan, splits it into two secret shares
// (Prio3SumVec) and encrypts one to the leader's key and one to the
// helper's key (HPKE). This file draws the page, keeps her data in this
// browser's localStorage and talks to the leader (this page's server) and,
// for its public key only, to the helper. Her ratings are never sent: the
// only request body that depends on them is the report of two encrypted
// shares, sent byte for byte as the device code produced it.
"use strict";

const KEY = {
  account: "privrec.dap.account", // {user, token} at the leader
  ratings: "privrec.dap.ratings", // {itemID: rating}
  // The device's own ledger (dap.Ledger: the budget ρ she accepted when
  // joining and the ρ of every task she sent a report for). A task is
  // recorded here before its report leaves; a task over her budget, or a
  // second report for the same task, is refused in the browser.
  ledger: "privrec.dap.ledger",
  pending: "privrec.dap.pending", // {task, taskText, report, reportBin, sizes, ms}: prepared, not yet sent
  sent: "privrec.dap.sent",       // [{task, id, bytes, charged}]
  helperKey: "privrec.dap.helper", // {url, key}: the helper's key, pinned at the first contribution
  // Split-noise tasks she opted in to and sent: {task: ρ this browser
  // counts beyond the stated ρ the leader charges (the one-aggregator ρ
  // less the stated)}.
  split: "privrec.dap.split",
};

// REPORT_TYPE is the binary encoding of a report (dap.EncodeReport), the
// upload body the Go devices send too; the JSON is only shown.
const REPORT_TYPE = "application/dap-report";

// fromBase64 is the bytes of a base64 string.
function fromBase64(s) { return Uint8Array.from(atob(s), (c) => c.charCodeAt(0)); }

let collection = null; // /dap-collection.json: {helper, items, scale, delta}
let tasks = [];        // [{text, info, released}] in the leader's order
let items = [];        // the items she can rate

// hostOf is the host[:port] of an http(s) URL.
function hostOf(u) { return u.replace(/^https?:\/\//, "").split("/")[0]; }

function account() { return load(KEY.account, null); }

// splitConsent is her opt-in to split-noise (honest-but-curious) tasks:
// the box in step 3, off whenever the page loads.
function splitConsent() { return $("allow-split").checked; }

// costText is what a task costs her, as this browser derived it: ε at the
// collection's δ, with the ρ (zCDP) her ledger counts as a detail; for a
// split-noise task, the figure against one operator that leaves its half
// of the noise out.
function costText(info) {
  const c = "ε = " + fmt(info.charge_epsilon) + " at δ = " + fmtDelta(info.delta) + " (ρ = " + fmt(info.charge_rho) + " zCDP)";
  return info.split ? c + " against one operator alone; ρ = " + fmt(info.rho) + " only while both add their noise" : c;
}

// shortCost is costText for the task table: ε with ρ beside it, and for a
// split-noise task that it is the figure against one operator and needs
// her consent.
function shortCost(info) {
  const c = "ε = " + fmt(info.charge_epsilon) + " (ρ = " + fmt(info.charge_rho) + ")";
  return info.split ? c + " against one operator alone; needs your consent (step 3)" : c;
}

// beyondLeader is the ρ this browser counts on purpose beyond the
// leader's charges (split-noise tasks at their one-operator ρ).
function beyondLeader() {
  return Object.values(load(KEY.split, {})).reduce((a, b) => a + b, 0);
}

function drawGuarantee() {
  const g = $("guarantee");
  g.textContent = "";
  const add = (text) => { const li = document.createElement("li"); li.textContent = text; g.appendChild(li); };
  const helper = hostOf(collection.helper);
  const split = tasks.some((t) => t.info && t.info.noise === "honest-but-curious");
  add("Your ratings never leave this device. They are kept in this browser and used only here.");
  add("For each task this browser works out your contribution from your ratings, splits it into two secret shares and encrypts one for each of two aggregators run by different operators: the leader (" +
      location.host + ", which served this page) and the helper (" + helper + "). Each share alone is random and says nothing about your ratings; the leader passes the helper's share on but cannot open it.");
  add("What the leader (" + location.host + ") receives: your token, which tasks you contribute to and when, your network address, share 1 (which only it can open) and share 2 sealed to the helper. Share 1 alone is random: it says nothing about your ratings.");
  add("What the helper (" + helper + ") receives: share 2, passed on by the leader without your token, and once this page's request for its public key (your network address). Share 2 alone is random too.");
  add("The aggregators check a proof that your contribution is within the task's limits, add up everyone's shares, and each adds random noise to its own total before the two are combined: only the noised total over all contributors is published.");
  add(split ?
    "Some tasks split the noise between the aggregators (the honest-but-curious setting): each operator adds only half of the noise, so their stated protection holds only if both add theirs. This browser does not contribute to them unless you tick the box in step 3; if you do, it charges you, and shows you, what one operator's half alone gives (a larger ε)." :
    "Each task's cost (ε, with the ρ of zCDP that your ledger counts) bounds what its published total can reveal about everything you put into it, even if one of the two aggregators is dishonest: each adds enough noise on its own.");
  add("This holds unless both operators collude: together they could put your two shares back together and see your contribution.");
  add("Your total is at most the budget you accept when you join. This browser keeps its own count and refuses a task that would pass it, and a second contribution to the same task, whatever the leader says.");
  add("Your recommendations are computed in this browser from the published total and your own ratings; nobody else sees them.");
  add("Not covered: the leader sees that you contributed to a task, when, and your network address; the code of this page comes from the leader's server.");
}

async function loadTasks() {
  const list = JSON.parse(await api("GET", "/dap/v1/tasks"));
  tasks = [];
  for (const t of list) {
    const text = JSON.stringify(t);
    const entry = { id: t.id, text, info: null, error: "", released: false };
    try {
      entry.info = device("dapTask", text, collection.delta);
    } catch (e) {
      entry.error = e.message;
    }
    try {
      await api("GET", "/dap/v1/tasks/" + encodeURIComponent(t.id) + "/release");
      entry.released = true;
    } catch (e) {
      if (e.status !== 404) throw e;
    }
    tasks.push(entry);
  }
}

function sentTasks() {
  const led = localStorage.getItem(KEY.ledger);
  return led === null ? {} : JSON.parse(led).tasks_nano_rho;
}

function drawTasks() {
  const body = $("tasks").tBodies[0];
  body.textContent = "";
  const mine = sentTasks();
  const joined = account() !== null;
  for (const t of tasks) {
    const tr = document.createElement("tr");
    tr.dataset.task = t.id;
    const cell = (text) => { const c = document.createElement("td"); c.textContent = text; tr.appendChild(c); return c; };
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = t.id;
    tr.appendChild(th);
    cell(t.info ? t.info.statistic + " (" + t.info.dimension + " numbers)" : "refused: " + t.error);
    cell(t.info ? shortCost(t.info) : "");
    const state = t.id in mine ? "you contributed" : t.released ? "published" : "open";
    cell(state + (t.id in mine && t.released ? "; published" : ""));
    const act = cell("");
    if (t.info && !t.released && !(t.id in mine)) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Prepare my shares";
      b.setAttribute("aria-label", "Prepare my shares for task " + t.id);
      b.disabled = !joined;
      b.addEventListener("click", () => onPrepare(t.id));
      act.appendChild(b);
    }
    body.appendChild(tr);
  }
  $("split-consent").hidden = !tasks.some((t) => t.info && t.info.split);
}

async function drawAccount() {
  const acc = account();
  $("enrol").disabled = acc !== null;
  if (acc === null) {
    $("who").textContent = "You have not joined yet. Joining gives this browser a secret token; nothing about you is asked.";
    $("ledger").textContent = "";
    drawTasks();
    return;
  }
  $("who").textContent = "You have joined as " + acc.user + ". Your secret token is kept in this browser.";
  try {
    const st = await api("GET", "/dap/v1/ledger", undefined, acc.token);
    const leader = JSON.parse(st);
    let text = "The leader's ledger: spent ρ = " + fmt(leader.spent_rho) + " of " + fmt(leader.budget_rho) + ".";
    const led = localStorage.getItem(KEY.ledger);
    if (led !== null) {
      const mine = device("dapLedgerStatus", led, st, beyondLeader());
      text += " This browser's own count: ρ = " + fmt(mine.spent) + " of the ρ = " + fmt(mine.budget) + " you accepted (" +
        mine.tasks + " task" + (mine.tasks === 1 ? "" : "s") + ").";
      if (mine.beyond_leader > 0) {
        text += " It counts ρ = " + fmt(mine.beyond_leader) + " more than the leader: the split-noise tasks you opted in to, at what one operator's noise alone gives.";
      }
      if (mine.disagreement) text += " Warning: " + mine.disagreement + ".";
    }
    $("ledger").textContent = text;
  } catch (e) {
    $("ledger").textContent = "Could not read your ledger: " + e.message;
  }
  drawTasks();
}

async function onEnrol() {
  $("enrol").disabled = true;
  try {
    const e = JSON.parse(await api("POST", "/dap/v1/users"));
    const led = JSON.parse(await api("GET", "/dap/v1/ledger", undefined, e.token));
    save(KEY.account, { user: e.user, token: e.token });
    // The budget she accepts by joining: the leader's now. Later changes
    // at the leader do not change this browser's count.
    localStorage.setItem(KEY.ledger, device("dapLedgerNew", location.origin, led.budget_rho).ledger);
    status("You have joined.");
  } catch (e) {
    status("Joining failed: " + e.message, true);
  }
  await drawAccount();
}

function refuse(text) {
  $("sent").className = "bad";
  $("sent").textContent = text;
  $("preview").hidden = true;
  status(text, true);
}

// helperConfig fetches the helper's HPKE key from the helper itself and
// pins it: a key that changes later is refused.
async function helperConfig() {
  const text = await api("GET", collection.helper.replace(/\/$/, "") + "/dap/v1/hpke_config");
  const key = JSON.parse(text).public_key;
  const pin = load(KEY.helperKey, null);
  if (pin !== null && (pin.url !== collection.helper || pin.key !== key)) {
    throw new Error("the helper's key or address changed since your first contribution (pinned " + pin.url + "); this browser will not seal a share to another key");
  }
  if (pin === null) save(KEY.helperKey, { url: collection.helper, key });
  return text;
}

function b64Head(s) { return s.length > 24 ? s.slice(0, 24) + "…" : s; }

async function onPrepare(id) {
  const acc = account();
  const led = localStorage.getItem(KEY.ledger);
  if (acc === null || led === null) { refuse("Join first."); return; }
  $("sent").className = "";
  $("sent").textContent = "";
  try {
    const taskText = await api("GET", "/dap/v1/tasks/" + encodeURIComponent(id));
    const consent = splitConsent();
    const info = device("dapTask", taskText, collection.delta);
    if (info.split && !consent) {
      refuse("Not prepared: task " + id + " splits the noise between the two operators (honest-but-curious: each adds half). " +
        "If one of them leaves its half out, your protection is only " + costText(info).split(" against")[0] +
        ", not the stated ρ = " + fmt(info.rho) + ". This browser contributes to it only with your consent: tick the box above.");
      return;
    }
    // A trial: the ledger is not changed until the shares are sent.
    try {
      device("dapLedgerReserve", led, taskText, consent);
    } catch (e) {
      refuse("This browser will not contribute to task " + id + ": " + e.message);
      return;
    }
    status("Computing and encrypting your shares…");
    const [lcfg, hcfg] = await Promise.all([api("GET", "/dap/v1/hpke_config"), helperConfig()]);
    const out = device("dapPrepare", taskText, lcfg, hcfg, JSON.stringify(load(KEY.ratings, {})), consent);
    save(KEY.pending, { task: id, taskText, report: out.report, reportBin: out.report_bin, sizes: out.sizes, ms: out.ms, consent });
    drawPreview();
    status("Your shares for task " + id + " are ready. Check them, then send them.");
  } catch (e) {
    refuse("Could not prepare your shares for task " + id + ": " + e.message);
  }
}

function drawPreview() {
  const p = load(KEY.pending, null);
  if (p === null) { $("preview").hidden = true; return; }
  const info = device("dapTask", p.taskText, collection.delta);
  const rep = JSON.parse(p.report);
  const helper = hostOf(collection.helper);
  const body = $("shares").tBodies[0];
  body.textContent = "";
  const row = (part, head, bytes, who, cls) => {
    const tr = document.createElement("tr");
    if (cls) tr.className = cls;
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = part;
    if (head) {
      const c = document.createElement("code");
      c.textContent = "starts " + b64Head(head);
      th.appendChild(c);
    }
    tr.appendChild(th);
    for (const v of [bytes, who]) {
      const c = document.createElement("td");
      c.textContent = v;
      tr.appendChild(c);
    }
    body.appendChild(tr);
  };
  row("Share 1, encrypted", rep.leader_share.ciphertext, String(p.sizes.leader_share), "the leader only (" + location.host + ")", "share-leader");
  row("Share 2, encrypted", rep.helper_share.ciphertext, String(p.sizes.helper_share), "the helper only (" + helper + "); it passes through the leader, which cannot open it", "share-helper");
  row("Public part of the proof", "", String(p.sizes.public_share), "both; reveals nothing about your ratings", "");
  row("Report ID (random)", "", String(p.sizes.id), "both", "");
  row("Sent on the wire (binary, " + REPORT_TYPE + "; as JSON it would be " + p.sizes.json + ")", "", String(p.sizes.body), "the leader", "share-total");
  $("report-json").textContent = p.report;
  $("timing").textContent = "Computed, split and encrypted on this device in " + Math.max(1, Math.round(p.ms)) + " ms (" + info.dimension + " numbers × " + info.bits + " bits).";
  const led = JSON.parse(localStorage.getItem(KEY.ledger));
  const spent = Object.values(led.tasks_nano_rho).reduce((a, b) => a + b, 0) / 1e9;
  $("spend").textContent = "Task " + p.task + " costs you " + costText(info) + (info.split ? " (you opted in; this is what you are charged)" : "") +
    ", of your budget ρ = " + fmt(led.budget_rho) + " (spent so far ρ = " + fmt(spent) + "; after sending ρ = " + fmt(spent + info.charge_rho) + ").";
  $("send").disabled = false;
  $("preview").hidden = false;
  document.body.dataset.prepared = p.task;
}

async function onSend() {
  const acc = account();
  const p = load(KEY.pending, null);
  if (acc === null || p === null) return;
  $("send").disabled = true;
  // The device ledger first (write-ahead): the ρ is spent once the shares
  // leave, even if the acknowledgement is lost. A report already counted
  // (its send failed) is sent again as it is, same ID and bytes: the
  // leader never stores or charges a task twice, and the same shares
  // reveal nothing more.
  if (!p.reserved) {
    try {
      const r = device("dapLedgerReserve", localStorage.getItem(KEY.ledger), p.taskText, p.consent === true);
      localStorage.setItem(KEY.ledger, r.ledger);
      const info = device("dapTask", p.taskText, collection.delta);
      if (info.split) {
        const split = load(KEY.split, {});
        split[p.task] = Math.max(0, r.charge_rho - info.rho);
        save(KEY.split, split);
      }
    } catch (e) {
      localStorage.removeItem(KEY.pending);
      refuse("Not sent: " + e.message);
      return;
    }
    p.reserved = true;
    save(KEY.pending, p);
  }
  let lastErr = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      // (A report prepared by an earlier version of this page has only
      // its JSON, which the leader accepts too.)
      const [body, ctype] = p.reportBin ? [fromBase64(p.reportBin), REPORT_TYPE] : [p.report, undefined];
      const r = JSON.parse(await api("PUT", "/dap/v1/tasks/" + encodeURIComponent(p.task) + "/reports", body, acc.token, ctype));
      const sent = load(KEY.sent, []);
      sent.push({ task: p.task, id: JSON.parse(p.report).id, bytes: p.sizes.body, charged: r.charged_rho });
      save(KEY.sent, sent);
      localStorage.removeItem(KEY.pending);
      $("preview").hidden = true;
      $("sent").className = "ok";
      const split = load(KEY.split, {});
      $("sent").textContent = "Sent to task " + p.task + ": two encrypted shares, " + p.sizes.body + " bytes. The leader charged ρ = " +
        fmt(r.charged_rho) + ": it counts ρ = " + fmt(r.spent_rho) + " of " + fmt(r.budget_rho) + "." +
        (p.task in split ? " This browser counts the task at ρ = " + fmt(device("dapTask", p.taskText, collection.delta).charge_rho) + ", what one operator's noise alone gives (split noise, which you opted in to)." : "");
      status("Your shares were sent.");
      await drawAccount();
      return;
    } catch (e) {
      lastErr = e;
      if (e.status !== undefined && e.status !== 429 && e.status < 500) break;
      await new Promise((res) => setTimeout(res, 300 * (attempt + 1)));
    }
  }
  $("sent").className = "bad";
  if (lastErr.status === 409) {
    // The leader holds a report of hers for the task (an earlier send
    // whose answer was lost) or has closed the task: nothing more to send.
    // The browser keeps the task's ρ counted: it cannot know whether an
    // earlier send arrived, and never counts less than it may have spent.
    localStorage.removeItem(KEY.pending);
    $("sent").textContent = "The leader refused it: " + lastErr.message + ". This browser keeps the task's ρ counted, once.";
  } else {
    $("sent").textContent = "Not sent: " + lastErr.message + " (this browser has counted the task: its shares may have arrived; press Send to try again with the same shares)";
    $("send").disabled = false;
  }
  await drawAccount();
}

// showRecs lists the recommendations the device code computed.
function showRecs(recs) {
  const list = $("recs");
  list.textContent = "";
  for (const r of recs) {
    const li = document.createElement("li");
    li.textContent = r.title || r.item;
    li.dataset.item = r.item;
    list.appendChild(li);
  }
  document.body.dataset.recs = String(recs.length);
}

function titleMap() {
  const titles = {};
  for (const it of items) if (it.title) titles[it.id] = it.title;
  return titles;
}

// loadModels lists the published models (recipes: the method, its
// settings and its tasks, GET /dap/v1/models) in the picker, newest
// selected unless she chose one that is still published; it returns them.
async function loadModels() {
  const recipes = JSON.parse(await api("GET", "/dap/v1/models"));
  const pick = $("dap-model");
  const chosen = pick.value;
  pick.textContent = "";
  for (const r of recipes) {
    const o = document.createElement("option");
    o.value = r.name;
    o.textContent = r.name + " (" + r.method + ", ε = " + fmt(r.epsilon) + ", " + r.tasks.length + " task" + (r.tasks.length === 1 ? "" : "s") + ")";
    pick.appendChild(o);
  }
  if (recipes.length > 0) pick.value = recipes.some((r) => r.name === chosen) ? chosen : recipes[recipes.length - 1].name;
  $("model-pick").hidden = recipes.length === 0;
  document.body.dataset.models = String(recipes.length);
  return recipes;
}

// modelRecommend builds the chosen published model (the newest unless
// she picked another) from its tasks' releases in this browser, with the
// method's own code, then her row and her recommendations. It returns
// false when no model is published.
async function modelRecommend(mine) {
  const recipes = await loadModels();
  if (recipes.length === 0) return false;
  const rec = recipes.find((r) => r.name === $("dap-model").value) || recipes[recipes.length - 1];
  const rels = [];
  for (const id of rec.tasks) rels.push(JSON.parse(await api("GET", "/dap/v1/tasks/" + encodeURIComponent(id) + "/release")));
  const out = device("dapModelRecommend", JSON.stringify(rec), JSON.stringify(rels), JSON.stringify(mine), JSON.stringify(titleMap()), 10);
  showRecs(out.recommendations);
  $("recs-note").textContent = "From the published model " + rec.name + " (" + rec.method + ", built in this browser from the published totals of " +
    rec.tasks.length + " task" + (rec.tasks.length === 1 ? "" : "s") + " in " + Math.max(1, Math.round(out.ms)) + " ms) and your " +
    Object.keys(mine).length + " ratings: your own part of the model is worked out here and never leaves this browser.";
  document.body.dataset.model = rec.name;
  return true;
}

async function onRecommend() {
  $("recs").textContent = "";
  await loadTasks();
  drawTasks();
  const mine = load(KEY.ratings, {});
  try {
    if (await modelRecommend(mine)) return;
  } catch (e) {
    $("recs-note").textContent = "Could not build the published model: " + e.message;
    return;
  }
  const counts = tasks.filter((t) => t.released && t.info && t.info.kind === "counts");
  if (counts.length === 0) {
    $("recs-note").textContent = "No recommendations yet: no model or item counts have been published.";
    return;
  }
  const t = counts[counts.length - 1];
  try {
    const text = await api("GET", "/dap/v1/tasks/" + encodeURIComponent(t.id) + "/release");
    const out = device("dapRecommend", text, JSON.stringify(mine), JSON.stringify(titleMap()), 10);
    showRecs(out.recommendations);
    const rel = JSON.parse(text);
    $("recs-note").textContent = "From the published item counts of task " + t.id + " (noise standard deviation " + fmt(rel.noise_sd) +
      " per item) and your " + Object.keys(mine).length + " ratings, computed in this browser: the most popular items you have not rated.";
  } catch (e) {
    $("recs-note").textContent = "Could not compute recommendations: " + e.message;
  }
}

function onForget() {
  if (!window.confirm("Forget your ratings, your token and this browser's ledger?")) return;
  for (const k of Object.values(KEY)) localStorage.removeItem(k);
  drawRatings(items, scaleValues(), KEY.ratings);
  $("preview").hidden = true;
  $("recs").textContent = "";
  drawAccount();
  status("Everything on this device was forgotten.");
}

function scaleValues() {
  return ratingValues({ min: collection.scale[0], max: collection.scale[1] });
}

async function main() {
  $("enrol").addEventListener("click", onEnrol);
  $("send").addEventListener("click", onSend);
  $("recommend").addEventListener("click", onRecommend);
  $("forget").addEventListener("click", onForget);
  $("allow-split").checked = false;
  $("filter").addEventListener("input", onFilter);
  try {
    const [text] = await Promise.all([api("GET", "/dap-collection.json"), startWasm()]);
    collection = JSON.parse(text);
    await Promise.all([loadTasks(), loadModels()]);
  } catch (e) {
    status("This page cannot be used: " + e.message, true);
    return;
  }
  items = collection.items || [];
  if (items.length === 0) {
    const t = tasks.find((x) => x.info);
    if (t) items = t.info.catalogue.map((id) => ({ id }));
  }
  drawGuarantee();
  drawRatings(items, scaleValues(), KEY.ratings);
  await drawAccount();
  drawPreview();
  $("recommend").disabled = false;
  status("Ready.");
  window.privrecInteractive = performance.now();
  document.body.dataset.ready = "1";
}

main();
