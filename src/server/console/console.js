// console.js — the console of `verdict serve` (docs/console.md). Reads
// /v1/stats and /v1/stats/recent once a second and /v1/snapshots/{id} on
// demand, the review queue from /v1/reviews; draws with uPlot. A reviewer's
// answer goes to POST /v1/reviews/{id}. Everything from the server is put in the page as
// text (textContent), never as markup: a request's fields are the caller's.
// The admin token, when typed in, stays in this page's memory and goes only
// in an Authorization header: never in a cookie, the URL or storage.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const palette = ["#2f5fd0", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285",
                   "#e67700", "#5c940d", "#364fc7", "#a61e4d"];
  let token = "";
  const charts = {};

  function headers() {
    return token ? { Authorization: "Bearer " + token } : {};
  }

  async function getJSON(path) {
    const r = await fetch(path, { headers: headers(), cache: "no-store", credentials: "omit" });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) {
      const msg = body && body.error ? body.error.code + ": " + body.error.message : "HTTP " + r.status;
      throw new Error(msg);
    }
    return body;
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function fmtUs(v) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    if (v >= 1000) return (v / 1000).toFixed(2) + " ms";
    return v.toFixed(1) + " µs";
  }

  function fmtInt(n) { return Number(n).toLocaleString("en-US"); }

  // ---- charts ----

  function chartWidth(div) { return Math.max(300, div.clientWidth || div.parentNode.clientWidth - 16); }

  // (Re)draws chart `id` with the x values t and the named series; a new set
  // of names makes a new chart, otherwise only the data changes.
  function draw(id, t, named, opts) {
    const div = $(id);
    const names = Object.keys(named);
    const key = names.join("\u0000");
    const data = [t].concat(names.map((n) => named[n]));
    let c = charts[id];
    if (c && c.key === key) {
      c.plot.setData(data);
      return;
    }
    if (c) c.plot.destroy();
    const series = [{}].concat(names.map((n, i) => ({
      label: n, stroke: palette[i % palette.length], width: 1.5, spanGaps: !!opts.spanGaps,
      value: (u, v) => (v === null || v === undefined ? "—" : opts.fmt ? opts.fmt(v) : v),
    })));
    const plot = new uPlot({
      width: chartWidth(div), height: 190, series: series,
      scales: { x: { time: true } },
      axes: [{}, { size: 56 }],
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    }, data, div);
    charts[id] = { plot: plot, key: key };
  }

  window.addEventListener("resize", () => {
    for (const id in charts) charts[id].plot.setSize({ width: chartWidth($(id)), height: 190 });
  });

  // ---- the live figures ----

  function lastIndex(arr) {
    for (let i = arr.length - 1; i >= 0; i--) if (arr[i] !== null && arr[i] > 0) return i;
    return -1;
  }

  function sum(arr) { let s = 0; for (const v of arr) s += v || 0; return s; }

  function setOptions(sel, values) {
    const have = new Set(Array.from(sel.options).map((o) => o.value));
    for (const v of values) if (!have.has(v)) sel.appendChild(el("option", v)).value = v;
  }

  function mixRows(box, title, named) {
    box.appendChild(el("div", title, "group"));
    const totals = Object.keys(named).map((k) => [k, sum(named[k])]).filter((x) => x[1] > 0);
    const all = totals.reduce((a, x) => a + x[1], 0);
    totals.sort((a, b) => b[1] - a[1]);
    if (!all) box.appendChild(el("div", "no decisions yet", "dim"));
    for (const [k, n] of totals) {
      const row = el("div", null, "row");
      row.appendChild(el("span", k));
      const bar = el("div", null, "bar");
      bar.style.width = (100 * n / all).toFixed(1) + "%";
      const wrap = el("div");
      wrap.appendChild(bar);
      row.appendChild(wrap);
      row.appendChild(el("span", (100 * n / all).toFixed(1) + "%"));
      box.appendChild(row);
    }
  }

  function showStats(s) {
    $("version-live").textContent = s.version.live.slice(0, 12);
    $("version-live").title = s.version.live;
    const cand = s.version.shadow || s.version.canary;
    $("version-shadow").textContent = !cand ? "none"
      : cand.slice(0, 12) + (s.version.shadow ? " (shadow)" : " (canary " + s.version.canary_percent + "%)");
    $("version-shadow").title = cand || "";
    $("version-agreement").textContent =
      s.version.agreement === null ? "—" : (100 * s.version.agreement).toFixed(2) + "%";
    $("window-note").textContent = s.t.length ? "(" + s.t.length + " s kept)" : "(first second not folded yet)";

    const n = s.t.length;
    $("rate-now").textContent = n ? fmtInt(s.decisions[n - 1]) : "—";
    $("total-decisions").textContent = fmtInt(s.totals.decisions);
    $("review-share").textContent = (100 * s.totals.review_share).toFixed(1) + "%";
    $("refused").textContent = fmtInt(s.totals.refused);
    $("deadline-misses").textContent = fmtInt(s.totals.model_deadline_misses);
    $("limit-refusals").textContent = fmtInt(s.totals.limit_refusals);
    $("write-errors").textContent = fmtInt(s.totals.snapshot_write_errors);
    if (s.engine) {
      $("queue-depth").textContent = fmtInt(s.engine.snapshot_queue_depth);
      $("snap-state").textContent = !s.engine.snapshots ? "snapshots off"
        : s.engine.snapshot_write_failing ? "the disk refuses writes" : "writing";
    }

    // the last second with decisions: its p50/p99, of the busiest strategy there
    const names = Object.keys(s.strategies);
    let at = -1, best = null;
    for (const name of names) {
      const st = s.strategies[name];
      const i = lastIndex(st.decisions);
      if (i > at || (i === at && best && st.decisions[i] > s.strategies[best].decisions[i])) {
        at = i; best = name;
      }
    }
    if (best !== null && at >= 0) {
      $("p50-now").textContent = fmtUs(s.strategies[best].p50_us[at]);
      $("p99-now").textContent = fmtUs(s.strategies[best].p99_us[at]);
      $("p99-now").dataset.us = s.strategies[best].p99_us[at];
      $("p-at").textContent = best + " at " + new Date(s.t[at] * 1000).toISOString().slice(11, 19) + "Z";
    }

    const rate = {}, p50 = {}, p99 = {};
    for (const name of names) {
      rate[name] = s.strategies[name].decisions;
      p50[name] = s.strategies[name].p50_us;
      p99[name] = s.strategies[name].p99_us;
    }
    draw("chart-rate", s.t, rate, {});
    draw("chart-p50", s.t, p50, { fmt: fmtUs });
    draw("chart-p99", s.t, p99, { fmt: fmtUs });
    draw("chart-source", s.t, s.sources, {});
    draw("chart-action", s.t, s.actions, {});

    const mix = $("mix");
    mix.replaceChildren();
    mixRows(mix, "by source", s.sources);
    mixRows(mix, "by action", s.actions);

    const tb = document.querySelector("#strategies tbody");
    tb.replaceChildren();
    for (const name of names) {
      const st = s.strategies[name];
      const i = lastIndex(st.decisions);
      const tr = el("tr");
      tr.dataset.strategy = name;
      tr.appendChild(el("td", name));
      tr.appendChild(el("td", fmtInt(st.total)));
      tr.appendChild(el("td", st.total ? (100 * st.review_total / st.total).toFixed(1) + "%" : "—"));
      tr.appendChild(el("td", i >= 0 ? fmtUs(st.p50_us[i]) : "—"));
      tr.appendChild(el("td", i >= 0 ? fmtUs(st.p99_us[i]) : "—"));
      tb.appendChild(tr);
    }
    setOptions($("f-strategy"), names);
    setOptions($("f-action"), Object.keys(s.actions).filter((a) => a !== "(other)"));
    setOptions($("rq-strategy"), names);
    setOptions($("rq-action"), Object.keys(s.actions).filter((a) => a !== "(other)"));
    setOptions($("rq-actions"), Object.keys(s.actions).filter((a) => a !== "(other)"));
  }

  function recentQuery() {
    const q = new URLSearchParams();
    for (const k of ["strategy", "action", "source", "review"]) {
      const v = $("f-" + k).value;
      if (v) q.set(k, v);
    }
    q.set("limit", "25");
    return "/v1/stats/recent?" + q.toString();
  }

  function showRecent(r) {
    const tb = document.querySelector("#recent-table tbody");
    tb.replaceChildren();
    for (const d of r.decisions) {
      const tr = el("tr");
      tr.appendChild(el("td", d.time.slice(11, 23)));
      const td = el("td");
      if (d.snapshot_id) {
        const a = el("a", d.snapshot_id.slice(0, 13) + "…");
        a.href = "#" + d.snapshot_id;
        a.title = d.snapshot_id;
        a.dataset.id = d.snapshot_id;
        a.addEventListener("click", (ev) => { ev.preventDefault(); openSnapshot(d.snapshot_id); });
        td.appendChild(a);
      } else {
        td.textContent = "—";
      }
      tr.appendChild(td);
      tr.appendChild(el("td", d.strategy));
      tr.appendChild(el("td", d.action === null ? "(error)" : d.action));
      tr.appendChild(el("td", d.source));
      tr.appendChild(el("td", d.rule || ""));
      tr.appendChild(el("td", d.review ? "yes" : ""));
      tr.appendChild(el("td", d.latency_us.toFixed(1)));
      tb.appendChild(tr);
    }
    $("recent-note").textContent = r.snapshot_ids.shown ? r.decisions.length + " shown"
      : "snapshot ids hidden: " + r.snapshot_ids.why;
  }

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const s = await getJSON("/v1/stats");
      showStats(s);
      if (!$("f-pause").checked) showRecent(await getJSON(recentQuery()));
      $("status").textContent = "live";
      $("status").className = "status-dot ok";
      $("updated").textContent = "updated " + new Date().toISOString().slice(11, 19) + "Z";
    } catch (e) {
      $("status").textContent = "no answer: " + e.message;
      $("status").className = "status-dot bad";
    } finally {
      busy = false;
    }
  }

  // ---- the review queue (GET /v1/reviews, POST /v1/reviews/{id}) ----

  let rqBusy = false;
  async function refreshReviews(force) {
    // a reviewer typing in the queue keeps the rows under the cursor
    const typing = Array.from(document.querySelectorAll("#rq-table input")).some(
      (i) => i.value !== "" || i === document.activeElement);
    if (rqBusy || (typing && !force)) return;
    rqBusy = true;
    try {
      const q = new URLSearchParams({ state: "pending", limit: "10" });
      for (const k of ["strategy", "action"]) if ($("rq-" + k).value) q.set(k, $("rq-" + k).value);
      const r = await getJSON("/v1/reviews?" + q.toString());
      $("rq-count").textContent = "(" + fmtInt(r.pending) + " pending)";
      $("rq-note").textContent = r.next_cursor ? "the oldest " + r.reviews.length + " shown" : "";
      const tb = document.querySelector("#rq-table tbody");
      tb.replaceChildren();
      for (const d of r.reviews) tb.appendChild(reviewRow(d));
    } catch (e) {
      $("rq-count").textContent = "";
      $("rq-note").textContent = e.message;
    } finally {
      rqBusy = false;
    }
  }

  function reviewRow(d) {
    const tr = el("tr");
    tr.dataset.id = d.snapshot_id;
    tr.appendChild(el("td", d.time.slice(0, 19).replace("T", " ")));
    const td = el("td");
    const a = el("a", d.snapshot_id.slice(0, 13) + "…");
    a.href = "#" + d.snapshot_id;
    a.title = d.snapshot_id;
    a.addEventListener("click", (ev) => { ev.preventDefault(); openSnapshot(d.snapshot_id); });
    td.appendChild(a);
    tr.appendChild(td);
    tr.appendChild(el("td", d.strategy));
    tr.appendChild(el("td", d.action));
    tr.appendChild(el("td", d.source));
    tr.appendChild(el("td", d.rule || ""));
    const answer = el("input");
    answer.setAttribute("list", "rq-actions");
    answer.size = 12;
    answer.className = "rq-answer";
    answer.placeholder = "action";
    const note = el("input");
    note.size = 24;
    note.className = "rq-text";
    note.placeholder = "why (optional)";
    tr.appendChild(el("td")).appendChild(answer);
    tr.appendChild(el("td")).appendChild(note);
    const btn = el("button", "Record");
    btn.type = "button";
    btn.className = "rq-record";
    const msg = el("span", "", "error");
    btn.addEventListener("click", async () => {
      msg.textContent = "";
      if (!answer.value.trim()) { msg.textContent = "give the right action"; return; }
      btn.disabled = true;
      try {
        const body = { action: answer.value.trim() };
        if (note.value.trim()) body.note = note.value.trim();
        const r = await fetch("/v1/reviews/" + encodeURIComponent(d.snapshot_id), {
          method: "POST", cache: "no-store", credentials: "omit",
          headers: Object.assign({ "Content-Type": "application/json" }, headers()),
          body: JSON.stringify(body),
        });
        const out = await r.json().catch(() => null);
        if (!r.ok) throw new Error(out && out.error ? out.error.code + ": " + out.error.message : "HTTP " + r.status);
        const done = el("tr");
        done.dataset.id = d.snapshot_id;
        for (const v of [out.reviewed_at, out.snapshot_id, out.strategy, out.decided, out.action, out.note || ""])
          done.appendChild(el("td", v));
        document.querySelector("#rq-done tbody").prepend(done);
        tr.remove();
        refreshReviews(false);
      } catch (e) {
        msg.textContent = e.message;
        btn.disabled = false;
      }
    });
    const last = el("td");
    last.appendChild(btn);
    last.appendChild(msg);
    tr.appendChild(last);
    return tr;
  }

  // ---- the snapshot viewer ----

  function dl(box, pairs) {
    box.replaceChildren();
    for (const [k, v] of pairs) {
      box.appendChild(el("dt", k));
      box.appendChild(el("dd", v === null || v === undefined ? "—" : typeof v === "object" ? JSON.stringify(v) : v));
    }
  }

  function kvTable(tbody, obj) {
    tbody.replaceChildren();
    const keys = obj ? Object.keys(obj) : [];
    if (!keys.length) tbody.appendChild(el("tr")).appendChild(el("td", "none", "dim"));
    for (const k of keys) {
      const tr = el("tr");
      tr.appendChild(el("td", k, "mono"));
      tr.appendChild(el("td", JSON.stringify(obj[k]), "mono"));
      tbody.appendChild(tr);
    }
  }

  function showSnapshot(p) {
    $("snap-action").textContent = p.action === null ? "(error)" : p.action;
    const al = $("snap-allowed");
    al.textContent = p.allowed ? "allowed" : "not allowed";
    al.className = "pill " + (p.allowed ? "yes" : "no");
    const rv = $("snap-review");
    rv.textContent = p.review ? "review needed" : "no review";
    rv.className = "pill" + (p.review ? " review" : "");
    $("snap-source").textContent = p.source;
    $("snap-rule").textContent = p.reason && p.reason.rule ? p.reason.rule : "—";
    $("snap-confidence").textContent = p.confidence;
    $("snap-reason").textContent = p.reason && p.reason.message ? p.reason.message : "";

    dl($("snap-meta"), [["id", p.id], ["time", p.time], ["decision point", p.point],
      ["strategy", p.strategy], ["key", p.key || "—"], ["candidates", (p.candidates || []).join(", ")],
      ["node", p.node]]);
    $("snap-request").textContent = JSON.stringify(p.request, null, 2);

    const tb = document.querySelector("#snap-trace tbody");
    tb.replaceChildren();
    const tr0 = p.trace;
    if (tr0 && tr0.rules) {
      tr0.rules.forEach((r, i) => {
        const tr = el("tr");
        if (r.rule === tr0.matched) tr.className = "matched";
        tr.appendChild(el("td", i + 1));
        tr.appendChild(el("td", r.rule === null ? "(unnamed)" : r.rule, "mono"));
        tr.appendChild(el("td", r.result + (r.error ? " — " + r.error : ""), "mono"));
        tb.appendChild(tr);
      });
      $("snap-trace-note").textContent = "matched: " + (tr0.matched || "none") + " · " +
        tr0.rules_considered + " of " + tr0.rules_total + " rules considered · cost " + tr0.cost;
    } else {
      $("snap-trace-note").textContent = "no trace recorded";
    }
    kvTable(document.querySelector("#snap-lets tbody"), p.lets);
    dl($("snap-model"), [["model version", p.model_version], ["score", p.model_score],
      ["confidence", p.model_confidence], ["model", p.model]]);
    kvTable(document.querySelector("#snap-features tbody"), p.features);

    const lat = $("snap-latency");
    lat.replaceChildren();
    const stages = p.latency_ns || {};
    const total = stages.total || 1;
    for (const k of Object.keys(stages)) {
      const row = el("div", null, "stage");
      row.appendChild(el("span", k));
      const wrap = el("div");
      const bar = el("div", null, "bar");
      bar.style.width = Math.min(100, 100 * stages[k] / total).toFixed(1) + "%";
      wrap.appendChild(bar);
      row.appendChild(wrap);
      row.appendChild(el("span", fmtUs(stages[k] / 1000)));
      lat.appendChild(row);
    }
    dl($("snap-versions"), [["engine", p.engine_version], ["policy (strategy)", p.policy_version],
      ["bundle", p.bundle_version], ["model", p.model_version], ["format", p.format]]);
    $("snap-inputs").textContent = JSON.stringify({ inputs: p.inputs, limits: p.limits, let_errors: p.let_errors }, null, 2);
    $("snap-view").hidden = false;
  }

  async function openSnapshot(id) {
    id = id.trim();
    $("snap-id").value = id;
    $("snap-error").textContent = "";
    const raw = $("snap-raw");
    raw.href = "/v1/snapshots/" + encodeURIComponent(id);
    raw.hidden = false;
    try {
      let p = null;
      // a decision of the last moment may not be on disk yet (durability
      // interval): asked again a few times before saying it is not found
      for (let i = 0; ; i++) {
        try { p = await getJSON("/v1/snapshots/" + encodeURIComponent(id)); break; } catch (e) {
          if (i >= 4 || !/^snapshot_not_found/.test(e.message)) throw e;
          await new Promise((r) => setTimeout(r, 400));
        }
      }
      showSnapshot(p);
      $("snapshot").scrollIntoView({ block: "start" });
    } catch (e) {
      $("snap-view").hidden = true;
      $("snap-error").textContent = e.message;
    }
  }

  function start() {
    $("token").addEventListener("input", (ev) => { token = ev.target.value.trim(); refreshReviews(true); });
    for (const k of ["strategy", "action"]) $("rq-" + k).addEventListener("change", () => refreshReviews(true));
    $("rq-refresh").addEventListener("click", () => refreshReviews(true));
    refreshReviews(true);
    setInterval(() => refreshReviews(false), 5000);
    $("snap-form").addEventListener("submit", (ev) => { ev.preventDefault(); openSnapshot($("snap-id").value); });
    for (const k of ["strategy", "action", "source", "review"]) $("f-" + k).addEventListener("change", refresh);
    if (/^#[0-9a-f-]{36}$/.test(location.hash)) openSnapshot(location.hash.slice(1));
    refresh();
    setInterval(refresh, 1000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
