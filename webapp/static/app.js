// The privrec browser client. The device code (randomization, fold-in
// recommendations) is Go compiled to WebAssembly (privrec.wasm, the global
// object privrec); this file only draws the page, keeps the person's data
// in this browser's localStorage and talks to the server that served it.
// The only request body that carries anything about her ratings is the
// report, sent byte for byte as the device code produced it and as the
// page showed it: randomized in local mode (her true ratings are never
// sent); in central mode her ratings as she entered them, which every text
// of the page says. Helpers shared with
// the two-aggregator page (dap.js) are in common.js, loaded first.
"use strict";

const KEY = {
  account: "privrec.account",   // {user, token}
  ratings: "privrec.ratings",   // {itemID: rating}
  pending: "privrec.pending",   // {ratingsKey, report (the exact JSON body)}
  sent: "privrec.sent",         // [{id, seq, epsilon, received}]
  // The device's own ledger (the device code's client.Ledger: the
  // collection she joined — mode, mechanism, ε, catalogue — the budget she
  // accepted, and each report's ID and ε). Each report is recorded here
  // before it is sent, and one that would pass her budget is refused in
  // the browser, whatever the service's ledger says; a configuration that
  // weakens the collection she joined is refused before anything is drawn.
  ledger: "privrec.ledger",
};

let cfg = null;      // the server's collection configuration
let cfgText = "";    // …as JSON, for the device code
let blocked = "";    // why this browser refuses the server's configuration ("" if it does not)

// sentText says what a report value means to a person.
function sentText(v) {
  if (v === null) return "missing";
  if (cfg.units === "levels") {
    const sc = cfg.scale;
    const r = sc.min + (v - 1) * (sc.max - sc.min) / (sc.levels - 1);
    return fmt(r);
  }
  return fmt(v);
}

function ratingsKey(r) {
  return JSON.stringify(Object.keys(r).sort().map((k) => [k, r[k]]));
}

function drawGuarantee() {
  const g = $("guarantee");
  g.textContent = "";
  const add = (text) => { const li = document.createElement("li"); li.textContent = text; g.appendChild(li); };
  if (cfg.mode === "local") {
    add("Your true ratings never leave this device. They are kept in this browser and used only here.");
    add("What is sent is a randomized report: every item of the catalogue, rated or not, is randomized before it leaves — " + howRandomized() +
        ". You see it, next to your true ratings, before sending.");
    if (cfg.mean_epsilon > 0) {
      add("Each report also carries your average rating with random noise added (your noised mean rating, ε = " + fmt(cfg.mean_epsilon) +
          " of the report's ε = " + fmt(cfg.report_epsilon) + "; the items' cells share the rest). It lets the service learn the typical rating level from everyone's noised averages.");
    }
    add("One report is ε = " + fmt(cfg.report_epsilon) + " differentially private for everything you put into it: which items you rated and how. " +
        "Whatever your ratings, no report is more than e^ε ≈ " + fmtBig(Math.exp(cfg.report_epsilon)) +
        " times likelier under them than under any other ratings. The smaller ε, the less a report can reveal about them.");
    add("Your total is at most ε = " + fmt(cfg.budget) + ": the service keeps a ledger of what each of your reports spends and refuses reports beyond this budget (" +
        cfg.max_reports + " report" + (cfg.max_reports === 1 ? "" : "s") + " in all).");
    add("Your recommendations are computed in this browser from the latest public release and your own ratings; the service never sees them.");
    add("Not covered: that you joined and when you send (the service sees that), your network address, and anything you tell anyone another way.");
  } else {
    add("Central mode: when you send your report, your ratings go to the operator of this service (" + location.host +
        ") exactly as you entered them. Nothing is randomized on this device; the operator stores your ratings and is trusted to protect them.");
    add("What the operator publishes: releases — models trained on everyone's ratings with random noise added — and nothing else about you. " +
        "Each release is charged to your budget; all of them together are at most ε = " + fmt(cfg.budget) + " (δ = " + fmtDelta(cfg.budget_delta) +
        ") differentially private for your ratings: whatever your ratings, nothing published is more than e^ε ≈ " + fmtBig(Math.exp(cfg.budget)) +
        " times likelier under them than under any other ratings, except with probability δ. (The operator's ledger counts this budget as zCDP ρ = " +
        fmt(cfg.budget_rho) + ".)");
    add("Your recommendations are computed in this browser from the latest public release and your own ratings.");
    add("Not covered: the operator, and anyone who gets into its database, can read the ratings you sent; that you joined and when you send; your network address.");
  }
}

// howRandomized says how the device randomizes each item (local mode).
function howRandomized() {
  if (cfg.mechanism === "rr") {
    const d = cfg.scale.levels;
    const keep = Math.exp(cfg.cell_epsilon) / (Math.exp(cfg.cell_epsilon) + d);
    return "randomized response at ε = " + fmt(cfg.cell_epsilon) + " per item: each item's value (a rating from " + fmt(cfg.scale.min) + " to " +
      fmt(cfg.scale.max) + ", or “not rated”) is kept with probability " + Math.round(keep * 100) + "% and otherwise replaced by one of the other " +
      d + " values, chosen at random";
  }
  const q = Math.exp(cfg.cell_epsilon / 2) / (Math.exp(cfg.cell_epsilon / 2) + 1);
  return "the modified Laplace mechanism at ε = " + fmt(cfg.cell_epsilon) + " per item: each rating, mapped to −1…1, is kept with probability " +
    Math.round(q * 100) + "% with random (Laplace) noise added, otherwise removed; an item you did not rate stays unrated with the same probability, otherwise it gets a rating of pure noise";
}

// drawModeTexts words the rating and report sections for the mode.
function drawModeTexts() {
  if (cfg.mode === "local") return;
  $("rate-note").textContent = "Your ratings are saved in this browser, and sent to the operator as you entered them when you send your report (central mode). Leave an item “not rated” if you do not know it.";
  $("report-caption").textContent = "What will be sent to the operator: your ratings exactly as you entered them (central mode: nothing is randomized)";
  $("col-truth").textContent = "Your rating";
  $("col-sent").textContent = "Sent (as entered)";
}

// budgetText words a ledger's spent and budget (in the ledger's unit) in
// the unit the budget is stated in: ε, with ρ as a detail in central mode.
function budgetText(spent, budget) {
  return device("budget", cfgText, spent, budget).text;
}

async function drawAccount() {
  const acc = load(KEY.account, null);
  $("enrol").disabled = acc !== null;
  $("export").disabled = acc === null;
  $("leave").disabled = acc === null;
  $("prepare").disabled = acc === null || blocked !== "";
  if (acc === null) {
    $("who").textContent = "You have not joined yet. Joining gives this browser a secret token; nothing about you is asked.";
    $("ledger").textContent = "";
    return null;
  }
  $("who").textContent = "You have joined as " + acc.user + ". Your secret token is kept in this browser.";
  try {
    const st = JSON.parse(await api("GET", "/v1/me", undefined, acc.token));
    let text = "Privacy budget: spent " + budgetText(st.spent, st.budget) +
      (st.period_start ? " in the period that began " + new Date(st.period_start).toLocaleString() : "") +
      "; " + st.reports + " report" + (st.reports === 1 ? "" : "s") + " sent" + (cfg.mode === "local" ? "." : " (reports cost nothing; releases are charged).");
    const led = localStorage.getItem(KEY.ledger);
    if (led !== null && cfg.mode === "local") {
      const mine = device("ledgerStatus", led, JSON.stringify(st));
      text += " This browser's own count: ε = " + fmt(mine.spent) + " of the ε = " + fmt(mine.budget) + " you accepted.";
      if (mine.disagreement) text += " Warning: " + mine.disagreement + ".";
    }
    $("ledger").textContent = text;
    return st;
  } catch (e) {
    $("ledger").textContent = "Could not read your ledger: " + e.message;
    return null;
  }
}

async function onEnrol() {
  $("enrol").disabled = true;
  try {
    const e = JSON.parse(await api("POST", "/v1/enroll"));
    save(KEY.account, { user: e.user, token: e.token });
    // The ledger pins the collection she joins now, in either mode.
    localStorage.setItem(KEY.ledger, device("ledgerNew", location.origin, cfgText).ledger);
    status("You have joined.");
  } catch (e) {
    status("Joining failed: " + e.message, true);
  }
  await drawAccount();
}

// pinCheck checks the server's configuration against the collection this
// browser joined (kept in its ledger) and sets blocked when it weakens it:
// another mode (central: true ratings), mechanism, a larger ε, another
// catalogue or scale. An account made before browsers pinned gets its pin
// now.
function pinCheck() {
  blocked = "";
  if (load(KEY.account, null) === null) return;
  try {
    let led = localStorage.getItem(KEY.ledger);
    if (led === null) led = device("ledgerNew", location.origin, cfgText).ledger;
    localStorage.setItem(KEY.ledger, device("ledgerCheck", led, location.origin, cfgText).ledger);
  } catch (e) {
    blocked = e.message;
  }
}

function showBlocked() {
  status("This browser will not prepare or send anything to this service: " + blocked, true);
  $("blocked").textContent = "Refused: " + blocked;
  $("blocked").hidden = false;
  $("preview").hidden = true;
  $("send").disabled = true;
}

async function onPrepare() {
  if (blocked !== "") { showBlocked(); return; }
  const mine = load(KEY.ratings, {});
  const rk = ratingsKey(mine);
  let pending = load(KEY.pending, null);
  // A report is drawn once per set of ratings: preparing again shows the
  // same draw, so that choosing among draws cannot weaken the protection.
  // A report prepared under a configuration that took no mean report (or
  // took one it lacks) is drawn again: the server would refuse it.
  const wantMean = cfg.mode === "local" && cfg.mean_epsilon > 0;
  if (pending === null || pending.ratingsKey !== rk || (typeof JSON.parse(pending.report).mean === "number") !== wantMean) {
    try {
      const out = device("randomize", cfgText, JSON.stringify(mine));
      pending = { ratingsKey: rk, report: out.report };
      save(KEY.pending, pending);
    } catch (e) {
      status("Could not prepare the report: " + e.message, true);
      return;
    }
  }
  const st = await drawAccount();
  const rep = JSON.parse(pending.report);
  const body = $("report-table").tBodies[0];
  body.textContent = "";
  cfg.items.forEach((it, j) => {
    const tr = document.createElement("tr");
    const td = (text, cls) => { const c = document.createElement("td"); c.textContent = text; if (cls) c.className = cls; tr.appendChild(c); };
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = itemTitle(it);
    tr.appendChild(th);
    const truth = mine[it.id] === undefined ? "not rated" : fmt(mine[it.id]);
    const sent = sentText(rep.values[j]);
    td(truth);
    td(sent, "sent" + (sent !== truth ? " changed" : ""));
    body.appendChild(tr);
  });
  const meanEl = $("report-mean");
  if (wantMean) {
    // Her true mean as the device computes it: the catalogue items she
    // rated (the scale's midpoint when none).
    const own = cfg.items.map((it) => mine[it.id]).filter((v) => v !== undefined);
    const truthMean = own.length ? own.reduce((a, b) => a + b, 0) / own.length : (cfg.scale.min + cfg.scale.max) / 2;
    meanEl.textContent = "Also sent: " + fmt(rep.mean) + ", your noised mean rating at ε = " + fmt(cfg.mean_epsilon) +
      " (your average rating, " + fmt(truthMean) + ", which stays here, plus random noise; the noise may take it outside the scale " +
      fmt(cfg.scale.min) + "–" + fmt(cfg.scale.max) + ").";
    meanEl.hidden = false;
  } else {
    meanEl.textContent = "";
    meanEl.hidden = true;
  }
  $("report-json").textContent = pending.report;
  const eps = cfg.mode === "local" ? rep.epsilon : 0;
  let text = cfg.mode === "local" ? "This report spends ε = " + fmt(eps) + " of your budget ε = " + fmt(cfg.budget) + "." :
    "Central mode: this report carries your ratings as you entered them to the operator. It costs nothing by itself; each release the operator publishes charges you against your budget ε = " +
    fmt(cfg.budget) + " at δ = " + fmtDelta(cfg.budget_delta) + " (zCDP ρ = " + fmt(cfg.budget_rho) + ")." +
    (st ? " Spent so far: " + budgetText(st.spent, st.budget) + "." : "");
  let ok = true;
  if (st && cfg.mode === "local") {
    text += " Spent so far: ε = " + fmt(st.spent) + "; after sending: ε = " + fmt(st.spent + eps) + ".";
    if (st.remaining + 1e-9 < eps) {
      text += " Your budget is used up: the service will refuse it.";
      ok = false;
    }
  }
  const led = localStorage.getItem(KEY.ledger);
  if (led !== null && cfg.mode === "local") {
    try {
      device("ledgerReserve", led, location.origin, pending.report); // a trial: the result is not kept
    } catch (e) {
      text += " This browser will not send it: " + e.message;
      ok = false;
    }
  }
  $("spend").textContent = text;
  $("send").disabled = !ok;
  $("preview").hidden = false;
  $("sent").textContent = "";
  status("Your report is ready. Check it, then send it.");
}

async function onSend() {
  const acc = load(KEY.account, null);
  const pending = load(KEY.pending, null);
  if (acc === null || pending === null) return;
  $("send").disabled = true;
  if (blocked !== "") { showBlocked(); return; }
  // The device ledger first (write-ahead): ε is spent once the report
  // leaves, even if the acknowledgement is lost.
  const led = localStorage.getItem(KEY.ledger);
  if (led !== null && cfg.mode === "local") {
    try {
      localStorage.setItem(KEY.ledger, device("ledgerReserve", led, location.origin, pending.report).ledger);
    } catch (e) {
      $("sent").className = "bad";
      $("sent").textContent = "Not sent: " + e.message;
      return;
    }
  }
  // Retried with the same report ID (and the same bytes) after a network
  // failure or a 5xx/429 answer: the server never stores or charges a
  // report twice.
  let lastErr = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const ack = JSON.parse(await api("POST", "/v1/reports", pending.report, acc.token));
      const sent = load(KEY.sent, []);
      sent.push({ id: ack.id, seq: ack.seq, epsilon: ack.epsilon, received: ack.received });
      save(KEY.sent, sent);
      localStorage.removeItem(KEY.pending);
      $("sent").className = "ok";
      $("sent").textContent = cfg.mode === "local" ?
        "Sent. The service charged ε = " + fmt(ack.epsilon) + ": you have spent " + budgetText(ack.spent, ack.budget) + "." :
        "Sent. Your ratings, as you entered them, are now with the operator. Sending cost nothing; each release the operator publishes is charged: spent so far " +
          budgetText(ack.spent, ack.budget) + ".";
      $("preview").hidden = true;
      status("Report sent.");
      await drawAccount();
      return;
    } catch (e) {
      lastErr = e;
      if (e.status !== undefined && e.status !== 429 && e.status < 500) break;
      await new Promise((r) => setTimeout(r, 300 * (attempt + 1)));
    }
  }
  $("sent").className = "bad";
  $("sent").textContent = "Not sent: " + lastErr.message;
  $("send").disabled = false;
}

// showWarnings shows where the release's noise drowns its statistic, as
// the device code judged it from the release's own values.
function showWarnings(ws) {
  const box = $("recs-warnings");
  box.textContent = "";
  for (const w of ws || []) {
    const p = document.createElement("p");
    p.textContent = "Warning: " + w.message;
    p.dataset.code = w.code;
    box.appendChild(p);
  }
  box.hidden = !ws || ws.length === 0;
}

async function onRecommend() {
  const list = $("recs");
  list.textContent = "";
  $("recs-kind").textContent = "";
  showWarnings([]);
  let text;
  try {
    text = await api("GET", "/v1/releases/latest");
  } catch (e) {
    $("recs-note").textContent = e.status === 404 ? "No recommendations yet: the service has not published a release." : "Could not fetch the release: " + e.message;
    return;
  }
  try {
    const rel = JSON.parse(text);
    const mine = load(KEY.ratings, {});
    const out = device("recommend", text, JSON.stringify(mine), 10);
    for (const r of out.recommendations) {
      const li = document.createElement("li");
      li.textContent = r.title || r.item;
      if (!out.ranking) {
        const s = document.createElement("span");
        s.className = "score";
        s.textContent = " — predicted rating " + (Math.round(r.score * 10) / 10).toFixed(1);
        li.appendChild(s);
      }
      list.appendChild(li);
    }
    $("recs-kind").textContent = out.ranking ?
      "A ranking, best first: " + rel.method + " is a top-N model, which orders the items for you and predicts no ratings." :
      "Each with the rating " + rel.method + " predicts you would give it (" + fmt(cfg.scale.min) + "–" + fmt(cfg.scale.max) + ").";
    showWarnings(out.warnings);
    $("recs-note").textContent = "From release " + rel.id + " (" + rel.method + ", published " + new Date(rel.created).toLocaleString() +
      ") and your " + Object.keys(mine).length + " ratings, computed in this browser.";
    document.body.dataset.recs = String(out.recommendations.length);
  } catch (e) {
    $("recs-note").textContent = "Could not compute recommendations: " + e.message;
  }
}

// onExport fetches everything the service stores about her
// (GET /v1/me/export), shows it and offers it as a file.
async function onExport() {
  const acc = load(KEY.account, null);
  if (acc === null) return;
  try {
    const text = await api("GET", "/v1/me/export", undefined, acc.token);
    const ex = JSON.parse(text);
    const pretty = JSON.stringify(ex, null, 2);
    $("export-json").textContent = pretty;
    const link = $("export-link");
    if (link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
    link.href = URL.createObjectURL(new Blob([pretty], { type: "application/json" }));
    link.download = "privrec-" + ex.user + ".json";
    $("export-details").hidden = false;
    $("export-details").open = true;
    $("export-note").className = "ok";
    $("export-note").textContent = "The service holds, about " + ex.user + ": " + ex.reports.length + " report" + (ex.reports.length === 1 ? "" : "s") +
      ", " + ex.states.length + " per-release state" + (ex.states.length === 1 ? "" : "s") + " and your ledger (spent " +
      budgetText(ex.ledger.spent, ex.ledger.budget) + "). Your token is kept there only as a hash.";
  } catch (e) {
    $("export-note").className = "bad";
    $("export-note").textContent = "Could not fetch your data: " + e.message;
  }
}

// onLeave deletes her at the service (DELETE /v1/me): her reports,
// states and token; the answer says what stays and why. Her ratings and
// this browser's own ledger stay on this device ("Forget everything"
// removes them).
async function onLeave() {
  const acc = load(KEY.account, null);
  if (acc === null) return;
  if (!window.confirm("Leave the service? Your reports and your token are deleted there; this cannot be undone.")) return;
  $("leave").disabled = true;
  try {
    const d = JSON.parse(await api("DELETE", "/v1/me", undefined, acc.token));
    localStorage.removeItem(KEY.account);
    localStorage.removeItem(KEY.pending);
    localStorage.removeItem(KEY.sent);
    $("preview").hidden = true;
    $("export-details").hidden = true;
    $("export-note").textContent = "";
    $("leave-note").className = "ok";
    $("leave-note").textContent = "You have left. Deleted at the service: " + d.reports_deleted + " report" + (d.reports_deleted === 1 ? "" : "s") +
      " and " + d.states_deleted + " per-release state" + (d.states_deleted === 1 ? "" : "s") + "; your token no longer works. " + d.retained.why +
      " Your ratings stay in this browser until you forget them.";
    status("You have left the service.");
  } catch (e) {
    $("leave-note").className = "bad";
    $("leave-note").textContent = "Could not leave: " + e.message;
  }
  await drawAccount();
}

function onForget() {
  if (!window.confirm("Forget your ratings and your token on this device?")) return;
  for (const k of Object.values(KEY)) localStorage.removeItem(k);
  drawRatings(cfg.items, ratingValues(cfg.scale), KEY.ratings);
  $("preview").hidden = true;
  $("recs").textContent = "";
  drawAccount();
  status("Everything on this device was forgotten.");
}

async function main() {
  $("enrol").addEventListener("click", onEnrol);
  $("prepare").addEventListener("click", onPrepare);
  $("send").addEventListener("click", onSend);
  $("recommend").addEventListener("click", onRecommend);
  $("forget").addEventListener("click", onForget);
  $("export").addEventListener("click", onExport);
  $("leave").addEventListener("click", onLeave);
  $("filter").addEventListener("input", onFilter);
  try {
    const [text] = await Promise.all([api("GET", "/v1/config"), startWasm()]);
    cfgText = text;
    cfg = JSON.parse(text);
    // The device checks the server's claims with its own code before it
    // randomizes anything.
    device("checkConfig", cfgText);
  } catch (e) {
    status("This page cannot be used: " + e.message, true);
    return;
  }
  pinCheck();
  drawGuarantee();
  drawModeTexts();
  drawRatings(cfg.items, ratingValues(cfg.scale), KEY.ratings);
  await drawAccount();
  $("recommend").disabled = false;
  if (blocked !== "") showBlocked();
  else status("Ready.");
  window.privrecInteractive = performance.now();
  document.body.dataset.ready = "1";
}

main();
