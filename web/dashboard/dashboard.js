// The satrap dashboard: polls /status (the head's admin, or `satrap train --status-port`) and
// renders the nodes, the actors per node, the jobs, the selected job's plots (uPlot) and the
// plan of the next pending job. Controls (cancel, checkpoint) POST with the admin token typed in
// the header field; the token lives in this page's memory only (never stored).
"use strict";
(function () {
  const POLL_MS = 2000;
  const dash = (window.satrapDashboard = { errors: [], polls: 0, failures: 0, plots: {}, status: null });
  window.addEventListener("error", (e) => dash.errors.push(String(e.message || e)));
  window.addEventListener("unhandledrejection", (e) => dash.errors.push(String(e.reason)));

  const $ = (sel) => document.querySelector(sel);
  let token = "";            // the admin token: page memory only
  let selectedJob = null;    // job id whose plots are shown
  let readOnly = false;

  // ---- formatting ----
  const fmtBytes = (b) => {
    if (b == null) return "–";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (b >= 100 || i === 0 ? b.toFixed(0) : b.toFixed(1)) + " " + u[i];
  };
  const fmtNum = (x, d = 0) => (x == null || !isFinite(x) ? "–" : Number(x).toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d }));
  const fmtRate = (x) => (x == null ? "–" : x >= 1e6 ? (x / 1e6).toFixed(2) + "M" : x >= 1e4 ? (x / 1e3).toFixed(1) + "k" : x.toFixed(0));
  const fmtCompact = (x) => (x == null ? "–" : x >= 1e6 ? +(x / 1e6).toFixed(1) + "M" : x >= 1e3 ? +(x / 1e3).toFixed(1) + "k" : String(x));
  const fmtAge = (ms) => (ms == null ? "–" : ms < 1000 ? ms + " ms" : ms < 120000 ? (ms / 1000).toFixed(1) + " s" : Math.round(ms / 60000) + " min");
  const el = (tag, attrs = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k);
    return e;
  };
  const bar = (frac, text) => el("span", {}, el("span", { class: "bar" }, el("span", { style: "width:" + Math.max(0, Math.min(1, frac || 0)) * 100 + "%" })), el("span", { class: "bar-text", text }));

  function notice(text, error) {
    const n = $("#notice");
    n.hidden = !text;
    n.textContent = text || "";
    n.className = error ? "error" : "";
  }

  // ---- token ----
  $("#token-form").addEventListener("submit", (e) => e.preventDefault());
  $("#token").addEventListener("input", (e) => {
    token = e.target.value.trim();
    $("#token-state").textContent = readOnly ? "read-only (embedded job)" : token ? "controls enabled" : "read-only";
  });

  async function control(jobId, action) {
    const headers = token ? { "X-Satrap-Token": token } : {};
    try {
      const r = await fetch("jobs/" + encodeURIComponent(jobId) + "/" + action, { method: "POST", headers });
      const body = await r.text();
      if (r.ok) notice(action + " " + jobId + ": done " + body.trim());
      else notice(action + " " + jobId + ": " + r.status + " " + body.trim(), true);
      dash.lastControl = { job: jobId, action, status: r.status, body };
    } catch (err) {
      notice(action + " " + jobId + ": " + err, true);
    }
    poll();
  }

  // ---- nodes ----
  function renderNodes(s) {
    const tb = $("#nodes tbody");
    tb.replaceChildren();
    let alive = 0;
    for (const n of s.nodes) {
      const state = n.alive ? "alive" : n.joined ? "dead" : "absent";
      alive += n.alive ? 1 : 0;
      const name = el("td", { title: n.host + ":" + n.port }, el("span", { class: "node-name", text: n.name }));
      for (const [k, v] of Object.entries(n.labels || {})) name.append(el("span", { class: "label", text: k + "=" + v }));
      const mem = n.resources.memory_bytes;
      const used = n.used ? n.used.memory_bytes : null;
      const restarts = n.process_restarts ?? n.restarts;
      tb.append(el("tr", { class: state, "data-node": n.name, "data-state": state },
        name,
        el("td", { class: "state " + state, text: state === "absent" ? "not joined" : state }),
        el("td", { text: fmtAge(n.last_heartbeat_ms_ago) }),
        el("td", { class: "num", text: (n.used ? fmtNum(n.used.cores, 1) + " / " : "") + fmtNum(n.resources.cores) }),
        el("td", { class: "mem" }, used == null ? el("span", { text: fmtBytes(mem) }) : bar(mem ? used / mem : 0, fmtBytes(used) + " / " + fmtBytes(mem))),
        el("td", { class: "num", text: (n.used ? n.used.gpus + " / " : "") + n.resources.gpus }),
        el("td", { class: "num restarts-col", text: restarts == null ? "–" : String(restarts) })));
    }
    // Process restarts: a column only when the status reports them.
    const anyRestarts = s.nodes.some((n) => (n.process_restarts ?? n.restarts) != null);
    for (const c of document.querySelectorAll("#nodes .restarts-col")) c.hidden = !anyRestarts;
    $("#nodes-summary").textContent = alive + " of " + s.nodes.length + " alive";
  }

  // ---- actors: a heat map per node ----
  const roleShort = { embedding_shard: "shard", gradient_aggregator: "aggr", data_loader: "loader", dense_trainer: "trainer" };
  function heat(frac) {  // pale yellow -> orange -> red
    const f = Math.max(0, Math.min(1, frac));
    return "hsl(" + (55 - 50 * f) + ", 90%, " + (92 - 42 * f) + "%)";
  }
  function renderActors(s) {
    const box = $("#actors");
    box.replaceChildren();
    const max = Math.max(1, ...s.actors.map((a) => a.messages_per_sec || 0));
    const order = Object.keys(roleShort);
    for (const n of s.nodes) {
      const mine = s.actors.filter((a) => a.node === n.name)
        .sort((a, b) => order.indexOf(a.role) - order.indexOf(b.role) || a.index - b.index);
      const cells = el("div", { class: "cells" });
      for (const a of mine) {
        const c = el("div", {
          class: "cell" + (a.mailbox > 16 ? " backed-up" : ""), "data-role": a.role,
          style: "background:" + heat((a.messages_per_sec || 0) / max),
          title: a.role + " " + a.index + " (job " + a.job + "): " + fmtNum(a.messages_per_sec, 1) + " messages/s, mailbox " + a.mailbox + ", " + a.messages_total + " messages"
        }, el("b", { text: (roleShort[a.role] || a.role) + " " + a.index }), fmtRate(a.messages_per_sec) + "/s · " + a.mailbox);
        cells.append(c);
      }
      if (!mine.length) cells.append(el("span", { class: "empty", text: n.alive ? "no actors" : "node not alive: no actors reported" }));
      box.append(el("div", { class: "node-actors", "data-node": n.name }, el("h3", { text: n.name + " (" + mine.length + ")" }), cells));
    }
  }

  // ---- jobs ----
  const finalStates = ["SUCCEEDED", "FAILED", "CANCELLED"];
  function renderJobs(s) {
    const tb = $("#jobs tbody");
    tb.replaceChildren();
    for (const j of s.jobs.slice().reverse()) {
      const frac = j.steps_total ? j.steps / j.steps_total : 0;
      const auc = j.test_auc != null ? j.test_auc : j.state === "RUNNING" ? j.running_auc : null;
      const actions = actionCell(j);
      const row = el("tr", { "data-job": j.id, "data-state": j.state, class: j.id === selectedJob ? "selected" : "", title: j.message || j.last_failure || "" },
        el("td", { text: j.id + " " + j.name }),
        el("td", { class: "state " + j.state, text: j.state }),
        el("td", { title: fmtNum(j.steps) + " of " + fmtNum(j.steps_total) + " steps" }, bar(frac, fmtCompact(j.steps) + " / " + fmtCompact(j.steps_total))),
        el("td", { class: "num", text: fmtRate(j.samples_per_sec) }),
        el("td", { class: "num", text: j.steps ? fmtNum(j.loss, 4) : "–" }),
        el("td", { class: "num", text: auc == null ? "–" : fmtNum(auc, 4) + (j.test_auc != null ? " test" : "") }),
        el("td", { class: "num", text: String(j.restarts) }),
        el("td", { class: "num", text: String(j.batches_replayed) }),
        el("td", { class: "num", text: j.checkpoints + (j.checkpoint_step >= 0 ? " @" + j.checkpoint_step : "") }),
        actions);
      row.addEventListener("click", () => { selectedJob = j.id; render(dash.status); });
      tb.append(row);
    }
    if (!s.jobs.length) tb.append(el("tr", {}, el("td", { colspan: "10", class: "empty", text: "no jobs yet: satrap submit JOB.yaml" })));
  }
  // The action buttons of a job live across polls (the rows are rebuilt): a click is never
  // lost to a redraw, and a cancel armed by the first click stays armed.
  const actionCells = {};
  function actionCell(j) {
    const key = readOnly || finalStates.includes(j.state) ? "none" : j.state === "RUNNING" ? "run" : "wait";
    const old = actionCells[j.id];
    if (old && old.key === key) return old.td;
    const td = el("td", { class: "controls" });
    if (key !== "none") {
      if (key === "run")
        td.append(el("button", { "data-action": "checkpoint", onclick: (e) => { e.stopPropagation(); control(j.id, "checkpoint"); }, text: "checkpoint" }), " ");
      const cancel = el("button", { "data-action": "cancel", text: "cancel" });
      let timer = null;
      cancel.addEventListener("click", (e) => {  // two clicks: arm, then confirm within 5 s
        e.stopPropagation();
        if (cancel.classList.contains("armed")) { clearTimeout(timer); control(j.id, "cancel"); return; }
        cancel.classList.add("armed");
        cancel.textContent = "really cancel?";
        timer = setTimeout(() => { cancel.classList.remove("armed"); cancel.textContent = "cancel"; }, 5000);
      });
      td.append(cancel);
    }
    actionCells[j.id] = { key, td };
    return td;
  }

  // ---- plots (uPlot) ----
  const plotDefs = [
    { key: "loss", title: "training loss", series: [{ field: "loss", label: "loss", stroke: "#0b63c5" }] },
    { key: "throughput", title: "samples/s", series: [{ field: "samples_per_sec", label: "samples/s", stroke: "#1a7f37" }] },
    { key: "step", title: "step time (ms)", series: [{ field: "step_seconds", label: "ms/step", stroke: "#8250df", scale: 1000 }] },
    { key: "auc", title: "AUC", series: [{ field: "running_auc", label: "running AUC (train)", stroke: "#bf8700" }, { field: "validation_auc", label: "validation AUC", stroke: "#cf222e" }] },
    { key: "logloss", title: "validation logloss", series: [{ field: "validation_logloss", label: "validation logloss", stroke: "#cf222e" }], needs: "validation_logloss" },
  ];
  function axisValue(v) {  // compact tick labels: 12k, 1.5M, 0.45
    if (v == null) return "";
    const a = Math.abs(v);
    if (a >= 1e6) return +(v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return +(v / 1e3).toFixed(1) + "k";
    return +v.toPrecision(4) + "";
  }
  function eventMarks(u) {  // checkpoints and restarts as vertical lines on the time axis
    const events = (u.satrapEvents || []);
    const ctx = u.ctx;
    ctx.save();
    for (const ev of events) {
      const x = u.valToPos(ev.t_ms / 1000, "x", true);
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.strokeStyle = ev.kind === "restart" ? "#cf222e" : "#1a7f37";
      ctx.lineWidth = 2 * devicePixelRatio;
      ctx.setLineDash(ev.kind === "restart" ? [] : [4 * devicePixelRatio, 3 * devicePixelRatio]);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    }
    ctx.restore();
  }
  function plotWidth() {
    const box = $("#plots");
    const w = box.clientWidth;
    const cols = Math.max(1, Math.floor((w + 8) / 428));
    return Math.max(300, Math.floor((w - 8 * (cols - 1)) / cols));
  }
  function renderPlots(s) {
    const job = s.jobs.find((j) => j.id === selectedJob);
    $("#plot-job").textContent = job ? job.id + " " + job.name + " · " + job.state : "(none)";
    const why = job ? job.message || (job.restarts ? "last restart: " + job.last_failure : "") : "";
    $("#plot-message").textContent = why;
    $("#plot-message").className = "meta" + (job && job.state === "FAILED" ? " dead" : "");
    const box = $("#plots");
    const h = job && job.history;
    if (!h || !h.t_ms.length) {
      for (const k of Object.keys(dash.plots)) { dash.plots[k].destroy(); delete dash.plots[k]; }
      box.replaceChildren(el("p", { class: "empty", text: job ? "no progress reported yet" : "no job selected" }));
      return;
    }
    if (box.querySelector(".empty")) box.replaceChildren();
    const xs = h.t_ms.map((t) => t / 1000);
    const width = plotWidth();
    for (const def of plotDefs) {
      const present = def.series.filter((sd) => Array.isArray(h[sd.field]) && h[sd.field].some((v) => v != null));
      if (!present.length || (def.needs && !present.some((sd) => sd.field === def.needs))) {
        if (dash.plots[def.key]) { dash.plots[def.key].root.parentNode.remove(); dash.plots[def.key].destroy(); delete dash.plots[def.key]; }
        continue;
      }
      const data = [xs, ...present.map((sd) => h[sd.field].map((v) => (v == null ? null : v * (sd.scale || 1))))];
      let u = dash.plots[def.key];
      const sig = present.map((sd) => sd.field).join(",");
      if (u && (u.satrapSig !== sig || u.satrapJob !== job.id)) { u.root.parentNode.remove(); u.destroy(); u = null; }
      if (!u) {
        const holder = el("div", { class: "plot", "data-plot": def.key }, el("h3", { text: def.title }));
        box.append(holder);
        u = new uPlot({
          width, height: 200,
          scales: { x: { time: true } },
          series: [{}, ...present.map((sd) => ({ label: sd.label, stroke: sd.stroke, width: 1.5, spanGaps: true, points: { show: false } }))],
          axes: [{}, { size: 56, values: (u, vals) => vals.map(axisValue) }],
          legend: { live: false },
          hooks: { draw: [eventMarks] },
        }, data, holder);
        u.satrapSig = sig;
        u.satrapJob = job.id;
        dash.plots[def.key] = u;
      } else {
        if (u.width !== width) u.setSize({ width, height: 200 });
        u.satrapEvents = h.events;
        u.setData(data);
      }
      u.satrapEvents = h.events;
      u.redraw(false, false);
    }
    // Step time percentiles over the newest 200 points, in the plot's title.
    const stepTitle = document.querySelector('[data-plot="step"] h3');
    if (stepTitle) {
      const recent = h.step_seconds.slice(-200).filter((v) => v != null).sort((a, b) => a - b);
      const q = (p) => recent[Math.min(recent.length - 1, Math.floor(p * recent.length))] * 1000;
      stepTitle.textContent = "step time (ms)" + (recent.length ? " · p50 " + q(0.5).toFixed(1) + " · p90 " + q(0.9).toFixed(1) + " · p99 " + q(0.99).toFixed(1) + " (newest " + recent.length + ")" : "");
    }
  }

  // ---- the pending job's plan ----
  function renderPlan(s) {
    const job = s.jobs.find((j) => j.plan);
    const box = $("#plan");
    $("#plan-job").textContent = job ? job.id + " " + job.name : "";
    if (!job) { box.replaceChildren(el("p", { class: "empty", text: "no pending job" })); return; }
    if (job.plan.error) { box.replaceChildren(el("p", { class: "dead", text: "does not fit: " + job.plan.error })); return; }
    const table = el("table", { id: "plan-table" }, el("thead", {}, el("tr", {},
      el("th", { text: "node" }), el("th", { text: "actors" }), el("th", { text: "memory" }), el("th", { class: "num", text: "cores" }), el("th", { class: "num", text: "gpus" }))));
    const tb = el("tbody");
    for (const n of job.plan.nodes) {
      const actors = Object.entries(n.actors).map(([r, c]) => c + " " + (roleShort[r] || r)).join(", ");
      tb.append(el("tr", { "data-node": n.node }, el("td", { text: n.node }), el("td", { text: actors || "–" }),
        el("td", { class: "mem" }, bar(n.memory_of ? n.memory_bytes / n.memory_of : 0, fmtBytes(n.memory_bytes) + " / " + fmtBytes(n.memory_of))),
        el("td", { class: "num", text: fmtNum(n.cores, 1) + " / " + n.cores_of }), el("td", { class: "num", text: n.gpus + " / " + n.gpus_of })));
    }
    table.append(tb);
    box.replaceChildren(table, el("p", { class: "meta", text: fmtNum(job.plan.embedding_rows) + " embedding rows, " + fmtNum(job.plan.dense_parameters) + " dense parameters, about " + fmtBytes(job.plan.network_bytes_per_step) + " over the network per step" }));
  }

  function render(s) {
    if (!s) return;
    readOnly = !!s.read_only;
    $("#cluster").textContent = (s.embedded ? "embedded job" : "cluster " + s.cluster) + " · v" + s.version;
    if (readOnly) { $("#token").disabled = true; $("#token-state").textContent = "read-only (embedded job)"; }
    if (!selectedJob || !s.jobs.some((j) => j.id === selectedJob)) {
      const running = s.jobs.find((j) => j.state === "RUNNING");
      selectedJob = running ? running.id : s.jobs.length ? s.jobs[s.jobs.length - 1].id : null;
    }
    renderNodes(s);
    renderActors(s);
    renderJobs(s);
    renderPlots(s);
    renderPlan(s);
  }

  let inFlight = false;
  async function poll() {
    if (inFlight) return;
    inFlight = true;
    try {
      const r = await fetch("status", { cache: "no-store" });
      if (!r.ok) throw new Error("/status answered " + r.status);
      dash.status = await r.json();
      dash.polls++;
      dash.lastOk = Date.now();
      render(dash.status);
      $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (err) {
      dash.failures++;
      $("#updated").textContent = "cannot reach " + location.host + ": " + err.message + " (retrying)";
    } finally {
      inFlight = false;
    }
  }
  window.addEventListener("resize", () => {
    const w = plotWidth();
    for (const u of Object.values(dash.plots)) u.setSize({ width: w, height: 200 });
  });
  poll();
  setInterval(poll, POLL_MS);
})();
