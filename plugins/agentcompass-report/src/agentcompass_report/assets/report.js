/* agentcompass report / view. Hand-written, no library, no build step.
 *
 * Data comes from the JSON block with id "data" (and, in report mode, one block "d-<run>-<row>" per
 * task detail, parsed only when the task is opened); in view mode details come from /api/task/<run>-<row> and the
 * page polls /api/summary. Every text is put in the page with textContent (el() below), never as HTML.
 */
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("data").textContent);
  var LIVE = DATA.mode === "view";
  var ROW_H = 30;
  var SVGNS = "http://www.w3.org/2000/svg";
  var COLORS = ["#2f6fdf", "#e07b00", "#6a3fc8", "#138a72", "#c2185b"];
  var ERROR_COLOR = "#c62828";

  // What the tests and the bench read: when the page was first rendered, how long the last filter took.
  var probe = { ready: false, filters: 0, lastFilterMs: null, readyAt: null, polls: 0 };
  window.__report = probe;

  // ---- state -------------------------------------------------------------------------------------------------
  var runs = DATA.runs;             // [{header, summary, live, columns, rows, warnings}]
  var records = [];                 // per run: rows as objects
  var table = null;                 // the table's rows: single run → records[0]; several → merged
  var view = { status: "", category: "", flag: "", text: "", sort: null, desc: false };
  var filtered = [];
  var detailCache = {};
  var lastVersion = null;
  var updatedAt = null;

  // ---- small helpers -----------------------------------------------------------------------------------------
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] == null) continue;
        if (k === "text") node.textContent = String(attrs[k]);
        else if (k === "cls") node.className = attrs[k];
        else if (k === "href") node.setAttribute("href", attrs[k]);
        else if (k === "on") { for (var ev in attrs.on) node.addEventListener(ev, attrs.on[ev]); }
        else node.setAttribute(k, attrs[k]);
      }
    }
    append(node, children);
    return node;
  }
  function append(node, children) {
    if (children == null) return node;
    if (!Array.isArray(children)) children = [children];
    children.forEach(function (c) {
      if (c == null || c === false) return;
      node.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    });
    return node;
  }
  function svg(tag, attrs, children) {
    var node = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) {
      if (k === "text") node.textContent = String(attrs[k]); else node.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }
  function fmt(x, digits) {
    if (x === "NaN" || x === "Infinity" || x === "-Infinity") return x;
    if (x == null || typeof x !== "number" || !isFinite(x)) return "–";
    return x.toFixed(digits == null ? 3 : digits);
  }
  function fmtInt(x) { return x == null ? "–" : Number(x).toLocaleString("en-US"); }
  function fmtSeconds(s) {
    if (s == null) return "–";
    if (s < 0.001) return s > 0 ? "<1 ms" : "0 ms";
    if (s < 1) return (s * 1000).toFixed(0) + " ms";
    if (s < 60) return s.toFixed(1) + " s";
    var m = Math.floor(s / 60), h = Math.floor(m / 60);
    return h ? h + " h " + (m % 60) + " min" : m + " min " + Math.round(s % 60) + " s";
  }
  function fmtCost(c) { return c == null ? "unknown" : "$" + (c < 0.01 && c > 0 ? c.toFixed(5) : c.toFixed(4)); }
  function retriedText(retried) {
    // The share of every call that went to attempts that were retried or cut short (all calls are counted above).
    var calls = 0, tokens = 0, cost = null;
    Object.keys(retried).forEach(function (role) {
      var u = retried[role] || {};
      calls += u.calls || 0; tokens += (u.prompt_tokens || 0) + (u.completion_tokens || 0);
      if (u.cost_usd != null) cost = (cost || 0) + u.cost_usd;
    });
    return calls ? " (of which retried or cut-short attempts: " + fmtInt(calls) + " · " + fmtInt(tokens) +
      (cost != null ? " · " + fmtCost(cost) : "") + ")" : "";
  }
  function fmtCI(ci) { return ci ? "[" + fmt(ci[0]) + ", " + fmt(ci[1]) + "]" : "too few tasks"; }
  function isError(status) { return status && status !== "COMPLETED" && status !== "UNFINISHED"; }
  function statusEl(status) { return el("span", { cls: "st " + (isError(status) ? "err" : "ok"), text: status || "–" }); }
  function labelOf(run, name) {
    var labels = (run.header.contract || {}).labels || {};
    return labels[name] || name;
  }
  function primaryOf(run) { return run.header.contract.primary; }
  function plural(n, word) { return fmtInt(n) + " " + word + (n === 1 ? "" : "s"); }

  // ---- rows --------------------------------------------------------------------------------------------------
  function toRecords(r) {
    var cols = runs[r].columns, out = [];
    runs[r].rows.forEach(function (arr, i) { out.push(rowObject(cols, arr, r, i)); });
    // Planned work without a final result: listed (and filterable) as UNFINISHED, after the results.
    (runs[r].unfinished || []).forEach(function (arr, j) {
      var o = rowObject(cols, arr, r, runs[r].rows.length + j); o.unfinished = true; out.push(o); });
    return out;
  }
  function rowObject(cols, arr, r, i) {
    var o = { run: r, index: i, key: r + "-" + i };
    for (var c = 0; c < cols.length; c++) o[cols[c]] = arr[c];
    o.search = (o.task_id + " " + (o.category || "") + " " + (o.error || "") + " " + (o.answer || "")).toLowerCase();
    return o;
  }
  function buildTable() {
    records = runs.map(function (_, r) { return toRecords(r); });
    if (runs.length === 1) { table = records[0]; return; }
    var byKey = {}, merged = [];
    records.forEach(function (recs, r) {
      recs.forEach(function (rec) {
        var k = rec.task_id + "\u0000" + rec.trial, m = byKey[k];
        if (!m) {
          m = byKey[k] = { task_id: rec.task_id, trial: rec.trial, category: rec.category, cells: [], index: merged.length };
          merged.push(m);
        }
        m.cells[r] = rec;
      });
    });
    merged.forEach(function (m) {
      var parts = [m.task_id, m.category || ""];
      m.statuses = [];
      for (var r = 0; r < runs.length; r++) {
        var c = m.cells[r];
        if (c) { parts.push(c.error || "", c.answer || ""); m.statuses.push(c.status); if (c.flags) m.flags = m.flags ? m.flags + ", " + c.flags : c.flags; }
        m["score" + r] = c ? (isError(c.status) ? 0 : c.score) : null;
        m["status" + r] = c ? c.status : null;
      }
      var a = m["score0"], b = m["score" + (runs.length - 1)];
      m.delta = a == null || b == null ? null : b - a;
      m.search = parts.join(" ").toLowerCase();
    });
    table = merged;
  }

  // ---- page skeleton -----------------------------------------------------------------------------------------
  var app = document.getElementById("app");
  var mainView, detailView, summaryHost, tableHost, scrollBox, spacer, countEl, liveEl;

  function build() {
    app.textContent = "";
    var first = runs[0].header;
    liveEl = el("span", { cls: "badge" + (LIVE ? " live" : ""), id: "live",
                          text: LIVE ? "live: refreshes as results arrive" : "report" });
    app.appendChild(el("div", { cls: "topbar" }, [
      el("h1", { text: runs.length > 1 ? "Comparison of " + runs.length + " runs" :
                 first.benchmark + " · " + first.harness + " · " + first.model }),
      liveEl,
      el("span", { cls: "muted small", text: LIVE ? "" : "written " + DATA.generated_at }),
    ]));
    if (LIVE && DATA.control) app.appendChild(controlBar(DATA.control));
    mainView = el("div", { id: "main" });
    detailView = el("div", { id: "detail" });
    app.appendChild(mainView);
    app.appendChild(detailView);
    summaryHost = el("div", { id: "summary" });
    tableHost = el("div", { id: "tasks-section" });
    mainView.appendChild(summaryHost);
    mainView.appendChild(tableHost);
    renderSummary();
    renderTableShell();
    route();
  }

  // ---- header and summary ------------------------------------------------------------------------------------
  function kv(label, value) {
    return el("div", null, [el("span", { cls: "k", text: label }), value instanceof Node ? value : String(value == null ? "–" : value)]);
  }
  function argsText(args) {
    var keys = Object.keys(args || {});
    return keys.length ? keys.map(function (k) { return k + "=" + args[k]; }).join(", ") : null;
  }
  function runHeader(run, r) {
    var h = run.header, s = run.summary || {};
    var roles = Object.keys(h.model_roles || {}).map(function (k) { return k + ": " + h.model_roles[k]; }).join(", ");
    var plugins = Object.keys(h.plugins || {}).map(function (k) { return k + " " + (h.plugins[k] || "?"); }).join(", ");
    var cost = null, usage = s.usage || {}, unknown = false;
    Object.keys(usage).forEach(function (role) {
      var u = usage[role];
      if (u.cost_usd != null) cost = (cost || 0) + u.cost_usd; else if (u.calls) unknown = true;
    });
    var calls = 0, tokens = 0;
    Object.keys(usage).forEach(function (role) {
      calls += usage[role].calls || 0; tokens += (usage[role].prompt_tokens || 0) + (usage[role].completion_tokens || 0);
    });
    var items = [
      kv("Run", h.run_id), kv("Benchmark", h.benchmark), kv("Harness", h.harness), kv("Model", h.model),
      kv("Model roles", roles || null), kv("Environment", h.environment + (h.executor !== "local" ? " via " + h.executor : "")),
      kv("Seed", h.seed), kv("Trials per task", h.trials),
      kv("Started", h.created_at ? h.created_at.replace("T", " ").replace(/\.\d+/, "") : null),
      kv("Duration", run.live ? "running (or stopped before its summary)" : fmtSeconds(s.duration_s) +
        ((s.invocations || []).length > 1 ? " over " + s.invocations.length + " invocations (resumed)" : "")),
      kv("Cost", unknown ? (cost ? "≥ " + fmtCost(cost) + " (some calls unpriced)" : "unknown (no prices for this model)") : fmtCost(cost || 0)),
      kv("Model calls · tokens", fmtInt(calls) + " · " + fmtInt(tokens) + retriedText(s.usage_retried || {})),
      kv("agentcompass · plugins", (h.agentcompass_version || "?") + " · " + (plugins || "–")),
      kv("Directory", h.path),
    ];
    [["Benchmark args", h.benchmark_args], ["Harness args", h.harness_args], ["Model args", h.model_args],
     ["Environment args", h.environment_args]].forEach(function (p) { var t = argsText(p[1]); if (t) items.push(kv(p[0], t)); });
    if (h.derived_from) items.push(kv("Scored again from", h.derived_from.run_dir || h.derived_from.run_id));
    if (h.resumed_at && h.resumed_at.length) items.push(kv("Resumed", h.resumed_at.length + "×, last " + h.resumed_at[h.resumed_at.length - 1]));
    var box = el("div", null, [
      runs.length > 1 ? el("h3", null, [swatch(r), "Run " + (r === 0 ? "A (baseline)" : String.fromCharCode(65 + r)) + ": " + h.run_id]) : null,
      el("div", { cls: "kv" }, items),
    ]);
    if (run.warnings && run.warnings.length) {
      box.appendChild(el("div", { cls: "warnings" }, [plural(run.warnings.length, "damaged line") + " skipped: ",
        run.warnings.slice(0, 5).join("; ")]));
    }
    return box;
  }
  function swatch(r) {
    var s = el("span", { cls: "swatch" });
    s.style.background = COLORS[r % COLORS.length];
    return s;
  }
  function statusChips(s) {
    var counts = s.status_counts || {};
    var order = ["COMPLETED", "RUN_ERROR", "PREPARE_ERROR", "EVAL_ERROR", "LIMIT_REACHED", "CANCELLED"];
    Object.keys(counts).forEach(function (k) { if (order.indexOf(k) < 0) order.push(k); });
    var chips = [];
    order.forEach(function (k) {
      var n = counts[k] || 0;
      if (!n && k !== "COMPLETED") return;
      var chip = el("span", { cls: "chip " + (isError(k) ? "err" : "ok") + (n ? "" : " zero"), "data-status": k,
                             text: k + ": " + fmtInt(n) });
      chips.push(chip);
    });
    var errors = 0;
    Object.keys(counts).forEach(function (k) { if (isError(k)) errors += counts[k]; });
    chips.push(el("span", { cls: "chip" + (errors ? " err" : ""), id: "errors-total",
                           text: errors ? fmtInt(errors) + " errored (counted as 0 in the mean)" : "no errors" }));
    if (s.n_unfinished) chips.push(el("span", { cls: "chip", id: "unfinished-total", "data-status": "UNFINISHED",
                           text: "UNFINISHED: " + fmtInt(s.n_unfinished) + " of " + fmtInt(s.n_planned) + " planned (not counted)" }));
    return el("div", { cls: "chips" }, chips);
  }
  function headline(run) {
    var s = run.summary || {}, m = ((s.metrics || {}).overall || {})[primaryOf(run)] || {};
    var label = labelOf(run, primaryOf(run));
    return el("div", { cls: "headline" }, [
      el("div", null, [el("div", { cls: "muted small", text: label + " (mean, errors count as 0)" }),
        el("div", { cls: "big", id: "primary-" + runs.indexOf(run), text: fmt(m.mean) }),
        el("div", { cls: "muted small", text: "95% CI " + fmtCI(m.ci95) + " · over " + plural(m.n || 0, "result") +
                    (m.n_tasks && m.n_tasks !== m.n ? " of " + plural(m.n_tasks, "task") : "") }) ]),
      el("div", null, [el("div", { cls: "muted small", text: "mean over completed only" }),
        el("div", { cls: "big", text: fmt(m.mean_completed) }),
        el("div", { cls: "muted small", text: fmtInt(m.n_completed) + " completed, " + fmtInt(m.n_errored) + " errored" })]),
      passOne(run),
      el("div", null, [el("div", { cls: "muted small", text: "tasks" }),
        el("div", { cls: "big", text: fmtInt(s.n_tasks) }),
        el("div", { cls: "muted small", text: fmtInt(s.n_finished) + " results finished" + (s.trials > 1 ? " (" + s.trials + " trials each)" : "") })]),
    ]);
  }
  function lede(run) {
    var s = run.summary || {}, h = run.header, m = ((s.metrics || {}).overall || {})[primaryOf(run)] || {};
    var counts = s.status_counts || {}, errors = 0;
    Object.keys(counts).forEach(function (k) { if (isError(k)) errors += counts[k]; });
    return "The model " + h.model + " (harness " + h.harness + ") " + (run.live ? "has so far finished " : "was run on ") +
      plural(s.n_tasks || 0, "task") + " of " + h.benchmark + (s.trials > 1 ? ", " + s.trials + " trials each" : "") +
      ": mean " + labelOf(run, primaryOf(run)) + " " + fmt(m.mean) + (m.ci95 ? " (95% CI " + fmt(m.ci95[0]) + " to " + fmt(m.ci95[1]) + ")" : m.mean != null ? " (too few tasks for a 95% interval)" : "") +
      ", " + (errors ? plural(errors, "result") + " ended in an error (counted as 0)." : "no result ended in an error.") +
      (s.n_unfinished ? " " + plural(s.n_unfinished, "planned result") + " of " + fmtInt(s.n_planned) + " did not finish (not counted)." : "");
  }
  function passOne(run) {
    var pk = ((run.summary || {}).metrics || {}).pass_k || [];
    if (!pk.length) return null;
    return el("div", null, [el("div", { cls: "muted small", text: "pass@1 (share of trials that succeed)" }),
      el("div", { cls: "big", text: fmt(pk[0].pass_at_k) }),
      el("div", { cls: "muted small", text: pk.length > 1 ? "pass@" + pk.length + " " + fmt(pk[pk.length - 1].pass_at_k) +
        " · pass^" + pk.length + " " + fmt(pk[pk.length - 1].pass_hat_k) : "errored trials count as failures" })]);
  }
  function metricsTable(run) {
    var s = run.summary || {}, metrics = s.metrics || {}, rowsOut = [];
    var names = Object.keys(metrics.overall || {});
    names.forEach(function (name) {
      rowsOut.push(metricRow(run, name, "all", metrics.overall[name], true));
      Object.keys(metrics.by_category || {}).forEach(function (cat) {
        var g = metrics.by_category[cat];
        if (g.metrics && g.metrics[name]) rowsOut.push(metricRow(run, name, cat, g.metrics[name], false));
      });
    });
    return el("table", { cls: "grid", id: "metrics-" + runs.indexOf(run) }, [
      el("thead", null, el("tr", null, ["metric", "group", "mean (errors = 0)", "95% CI", "mean (completed)", "results",
        "errored", "missing"].map(function (t, i) { return el("th", { cls: i > 1 ? "num" : null, text: t }); }))),
      el("tbody", null, rowsOut),
    ]);
  }
  function metricRow(run, name, group, m, bold) {
    var tr = el("tr", null, [
      el("td", { text: labelOf(run, name) }), el("td", { text: group }),
      el("td", { cls: "num", text: fmt(m.mean) }), el("td", { cls: "num", text: fmtCI(m.ci95) }),
      el("td", { cls: "num", text: fmt(m.mean_completed) }), el("td", { cls: "num", text: fmtInt(m.n) }),
      el("td", { cls: "num" + (m.n_errored ? " errtext" : ""), text: fmtInt(m.n_errored) }),
      el("td", { cls: "num", text: fmtInt(m.n_missing) }),
    ]);
    if (bold) tr.style.fontWeight = "600";
    return tr;
  }
  function passKTable(run) {
    var s = run.summary || {}, pk = ((s.metrics || {}).pass_k) || [];
    if (!pk.length || (pk.length === 1 && runs.length === 1)) return null;  // one trial: pass@1 is in the headline
    // One row per k (a 20-trial run is 20 rows, not 40 columns), a column pair per group; wide tables scroll.
    var cats = (s.metrics || {}).by_category || {};
    var groups = [["all", pk]].concat(Object.keys(cats).map(function (c) { return [c, cats[c].pass_k]; }));
    var byGroup = groups.map(function (g) { var m = {}; (g[1] || []).forEach(function (p) { m[p.k] = p; }); return m; });
    var head = ["k"];
    groups.forEach(function (g) { head.push(g[0] + " pass@k", g[0] + " pass^k"); });
    var body = pk.map(function (p) {
      var cells = [el("td", { cls: "num", text: String(p.k) })];
      byGroup.forEach(function (m) {
        cells.push(el("td", { cls: "num", text: m[p.k] ? fmt(m[p.k].pass_at_k) : "–" }),
                   el("td", { cls: "num", text: m[p.k] ? fmt(m[p.k].pass_hat_k) : "–" }));
      });
      return el("tr", null, cells);
    });
    return el("div", null, [
      el("h3", { text: "pass@k (any of k trials succeeds) and pass^k (all k succeed)" }),
      el("div", { cls: "xscroll" }, el("table", { cls: "grid", id: "passk-" + runs.indexOf(run) }, [
        el("thead", null, el("tr", null, head.map(function (t) { return el("th", { cls: "num", text: t }); }))),
        el("tbody", null, body)])),
    ]);
  }

  // ---- charts ------------------------------------------------------------------------------------------------
  function barChart(title, groups, series, opts) {
    // groups: [label]; series: [{name, color, values: [number|null], ci: [[lo,hi]|null]}]
    var W = 560, H = 230, L = 40, B = 46, T = 14, R = 10;
    var maxV = opts.max != null ? opts.max : 0;
    series.forEach(function (s) { s.values.forEach(function (v, i) {
      maxV = Math.max(maxV, v || 0, s.ci && s.ci[i] && !opts.unit ? s.ci[i][1] : 0); }); });
    if (!maxV) maxV = 1;
    if (opts.unit && maxV <= 1.0001) maxV = 1;
    if (opts.integer) { var step = Math.max(1, Math.ceil(maxV / 4)); maxV = step * 4; }
    var plotW = W - L - R, plotH = H - T - B, gw = plotW / Math.max(groups.length, 1);
    var bw = Math.min(40, (gw * 0.75) / Math.max(series.length, 1));
    var nodes = [];
    for (var t = 0; t <= 4; t++) {
      var v = maxV * t / 4, y = T + plotH - plotH * t / 4;
      nodes.push(svg("line", { x1: L, x2: W - R, y1: y, y2: y, stroke: "#e6e9ed" }));
      nodes.push(svg("text", { x: L - 4, y: y + 4, "text-anchor": "end", text: opts.integer ? Math.round(v) : v.toFixed(2) }));
    }
    groups.forEach(function (g, gi) {
      var x0 = L + gi * gw + (gw - bw * series.length) / 2;
      series.forEach(function (s, si) {
        var v = s.values[gi];
        if (v == null) return;
        var h = plotH * Math.max(v, 0) / maxV, x = x0 + si * bw;
        if (opts.integer) nodes.push(svg("text", { x: x + bw / 2, y: T + plotH - h - 3, "text-anchor": "middle", text: v }));
        if (opts.integer && !v) return;
        var rect = svg("rect", { x: x + 1, y: T + plotH - h, width: Math.max(bw - 2, 1), height: Math.max(h, 0.5),
                                fill: (s.colors && s.colors[gi]) || s.color });
        rect.appendChild(svg("title", { text: g + " · " + s.name + ": " + (opts.integer ? v : fmt(v)) }));
        nodes.push(rect);
        var ci = s.ci && s.ci[gi];
        if (ci) {
          var cx = x + bw / 2, y1 = T + plotH - plotH * Math.max(ci[0], 0) / maxV, y2 = T + plotH - plotH * Math.max(Math.min(ci[1], maxV), 0) / maxV;
          nodes.push(svg("line", { x1: cx, x2: cx, y1: y1, y2: y2, stroke: "#333", "stroke-width": 1.2 }));
          nodes.push(svg("line", { x1: cx - 4, x2: cx + 4, y1: y1, y2: y1, stroke: "#333" }));
          nodes.push(svg("line", { x1: cx - 4, x2: cx + 4, y1: y2, y2: y2, stroke: "#333" }));
        }
      });
      var label = g.length > 16 ? g.slice(0, 15) + "…" : g;
      nodes.push(svg("text", { x: L + gi * gw + gw / 2, y: H - B + 16, "text-anchor": "middle", text: label }));
    });
    nodes.push(svg("line", { x1: L, x2: W - R, y1: T + plotH, y2: T + plotH, stroke: "#999" }));
    if (opts.xlabel) nodes.push(svg("text", { x: L + plotW / 2, y: H - 8, "text-anchor": "middle", text: opts.xlabel }));
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title }, nodes);
    var legend = series.length > 1 ? el("div", { cls: "legend" }, series.map(function (s, i) {
      return el("span", null, [swatch(i), s.name]); })) : null;
    return el("div", { cls: "chart", id: opts.id }, [el("div", { cls: "small", text: title }), root, legend,
      opts.note ? el("div", { cls: "muted small", text: opts.note }) : null]);
  }
  function categoryChart() {
    var cats = {};
    runs.forEach(function (run) { Object.keys(((run.summary || {}).metrics || {}).by_category || {}).forEach(function (c) { cats[c] = 1; }); });
    var groups = ["all"].concat(Object.keys(cats).sort());
    var series = runs.map(function (run, r) {
      var m = (run.summary || {}).metrics || {}, p = primaryOf(run);
      var vals = [], ci = [];
      groups.forEach(function (g) {
        var a = g === "all" ? (m.overall || {})[p] : (((m.by_category || {})[g] || {}).metrics || {})[p];
        vals.push(a ? a.mean : null); ci.push(a ? a.ci95 : null);
      });
      return { name: runs.length > 1 ? "run " + String.fromCharCode(65 + r) : labelOf(run, p), color: COLORS[r % COLORS.length], values: vals, ci: ci };
    });
    return barChart(labelOf(runs[0], primaryOf(runs[0])) + " per category (mean, errors = 0, with 95% CI)", groups, series,
                    { id: "chart-categories", max: null, unit: unitMetric(),
                      note: null });
  }
  function unitMetric() {
    return records.every(function (recs) { return recs.every(function (o) { return o.score == null || (o.score >= 0 && o.score <= 1); }); });
  }
  function distributionChart() {
    var BINS = 10, lo = Infinity, hi = -Infinity;
    records.forEach(function (recs) { recs.forEach(function (o) {
      if (!isError(o.status) && o.score != null) { lo = Math.min(lo, o.score); hi = Math.max(hi, o.score); } }); });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (lo >= 0 && hi <= 1) { lo = 0; hi = 1; }
    var distinct = {};
    records.forEach(function (recs) { recs.forEach(function (o) { if (!isError(o.status) && o.score != null) distinct[o.score] = 1; }); });
    var values = Object.keys(distinct).map(Number).sort(function (a, b) { return a - b; });
    var groups, binOf;
    if (values.length <= 6) {
      groups = values.map(function (v) { return String(Math.round(v * 1000) / 1000); });
      binOf = function (v) { return values.indexOf(v); };
    } else {
      groups = []; var w = (hi - lo) / BINS || 1;
      for (var b = 0; b < BINS; b++) groups.push(fmt(lo + b * w, 2) + "–" + fmt(lo + (b + 1) * w, 2));
      binOf = function (v) { return Math.min(BINS - 1, Math.floor((v - lo) / w)); };
    }
    groups.push("error");
    var series = runs.map(function (run, r) {
      var counts = groups.map(function () { return 0; });
      records[r].forEach(function (o) {
        if (isError(o.status)) counts[groups.length - 1]++;
        else if (o.score != null) counts[binOf(o.score)]++;
      });
      var colors = groups.map(function (_, i) { return i === groups.length - 1 ? ERROR_COLOR : COLORS[r % COLORS.length]; });
      return { name: runs.length > 1 ? "run " + String.fromCharCode(65 + r) : "results", color: COLORS[r % COLORS.length],
               colors: colors, values: counts, ci: null };
    });
    return barChart("Distribution of " + labelOf(runs[0], primaryOf(runs[0])) + " (results per value; errors apart, in red)",
                    groups, series, { id: "chart-distribution", integer: true, xlabel: labelOf(runs[0], primaryOf(runs[0])) });
  }

  // ---- verdict stability (several trials): how often a task's trials disagree on its verdict -------------------
  function flipSection(run, r) {
    var s = run.summary || {}, v = s.verdicts;
    if (!v || (s.trials || run.header.trials || 1) < 2 || !v.n_tasks) return null;
    var rates = v.flip_rates || {};
    var flipping = Object.keys(rates).filter(function (t) { return rates[t] > 0; })
      .sort(function (a, b) { return rates[b] - rates[a] || (a < b ? -1 : a > b ? 1 : 0); });
    var out = [el("h3", { text: "Verdict flips across trials" }),
      el("p", { cls: "muted small", id: "flips-lede-" + r, text: "A trial passes when " + v.metric + " ≥ " + fmt(v.threshold, 4) +
        "; a task's flip rate is the share of its trials whose verdict differs from its majority. Mean flip rate " +
        fmt(v.mean_flip_rate) + "; " + fmtInt(v.n_flipping) + " of " + plural(v.n_tasks, "task") + " with any flip" +
        (flipping.length < v.n_tasks ? " (every other task: 0)." : ".") })];
    if (flipping.length) out.push(el("table", { cls: "grid", id: "flips-" + r }, [
      el("thead", null, el("tr", null, [el("th", { text: "task" }), el("th", { cls: "num", text: "flip rate" })])),
      el("tbody", null, flipping.map(function (t) {
        return el("tr", { "data-task": t }, [el("td", { text: t }), el("td", { cls: "num", text: fmt(rates[t]) })]);
      }))]));
    return el("div", { id: "verdict-flips-" + r }, out);
  }

  // ---- comparison --------------------------------------------------------------------------------------------
  function comparisonSection() {
    if (!DATA.comparisons || !DATA.comparisons.length) return null;
    var out = [el("h2", { text: "Paired differences (each run against run A, on the tasks both finished)" })];
    DATA.comparisons.forEach(function (c, ci) {
      var b = ci + 1;
      out.push(el("h3", null, [swatch(b), "Run " + String.fromCharCode(65 + b) + " − run A" +
        (c.n_shared_tasks ? " · " + plural(c.n_shared_tasks, "shared task") : "")]));
      if (c.problem) { out.push(el("div", { cls: "box note", text: c.problem })); return; }
      out.push(el("table", { cls: "grid", id: "comparison-" + b }, [
        el("thead", null, el("tr", null, ["metric", "group", "tasks", "A mean", "B mean", "B − A", "95% CI of B − A",
          "MDE", "reading", "B better", "B worse", "equal"].map(function (t, i) { return el("th", { cls: i > 1 && i !== 8 ? "num" : null, text: t }); }))),
        el("tbody", null, c.metrics.map(function (m) {
          // as results compare reads it: within noise when the 95% CI contains 0 (or there is none)
          var noise = m.within_noise == null ? !(m.ci95 && (m.ci95[0] > 0 || m.ci95[1] < 0)) : m.within_noise;
          var reading = noise ? "within noise" + (m.ci95 ? "" : " (too few tasks)") : m.difference > 0 ? "B better" : "B worse";
          return el("tr", null, [el("td", { text: labelOf(runs[0], m.metric) }), el("td", { text: m.category || "all" }),
            el("td", { cls: "num", text: fmtInt(m.n_tasks) }), el("td", { cls: "num", text: fmt(m.a.mean) }),
            el("td", { cls: "num", text: fmt(m.b.mean) }),
            el("td", { cls: "num", text: (m.difference > 0 ? "+" : "") + fmt(m.difference) }),
            el("td", { cls: "num", text: fmtCI(m.ci95) }), el("td", { cls: "num mde", text: fmt(m.mde) }),
            el("td", { cls: "reading", text: reading }), el("td", { cls: "num", text: fmtInt(m.b_better) }),
            el("td", { cls: "num", text: fmtInt(m.b_worse) }), el("td", { cls: "num", text: fmtInt(m.equal) })]);
        })),
      ]));
      out.push(el("p", { cls: "muted small", text: "MDE: the smallest difference these tasks and trials detect (80% power, " +
        "5% two-sided); within noise: the 95% CI contains 0." }));
    });
    return el("div", { id: "differences" }, out);
  }

  function renderSummary() {
    summaryHost.textContent = "";
    summaryHost.appendChild(el("h2", { text: runs.length > 1 ? "Runs" : "Run" }));
    runs.forEach(function (run, r) { summaryHost.appendChild(runHeader(run, r)); });
    // The comparison's answer (is B better than A?) first, then each run's own results.
    var cmp = comparisonSection();
    if (cmp) summaryHost.appendChild(cmp);
    runs.forEach(function (run, r) {
      summaryHost.appendChild(el("h2", { id: "results-" + r, text: "Results" + (runs.length > 1 ? " of run " + String.fromCharCode(65 + r) : "") +
        (run.live ? " so far" : "") }));
      if (run.live && !LIVE) summaryHost.appendChild(el("div", { cls: "box note", text: "This run has not written its summary: it is " +
        "still going, or it was killed. These figures are over the results recorded so far; agentcompass run --resume " +
        run.header.path + " finishes it, and agentcompass view " + run.header.path + " follows it live." }));
      summaryHost.appendChild(el("p", { cls: "lede", id: "lede-" + r, text: lede(run) }));
      summaryHost.appendChild(headline(run));
      summaryHost.appendChild(el("div", { id: "status-" + r }, statusChips(run.summary || {})));
      if (run.summary && run.summary.n_unfinished) summaryHost.appendChild(el("div", { cls: "box note", id: "unfinished-" + r,
        text: "Unfinished: " + fmtInt(run.summary.n_unfinished) + " of " + fmtInt(run.summary.n_planned) + " planned results have no final record" +
          (run.summary.interrupted ? " (the run was interrupted)" : "") + "; every figure here is over the " + fmtInt(run.summary.n_finished) +
          " finished ones. agentcompass run --resume " + run.header.path + " finishes it." }));
      if (run.summary && run.summary.stopped_reason) summaryHost.appendChild(el("div", { cls: "box note", text: "Stopped: " + run.summary.stopped_reason }));
      if (runs.length === 1) summaryHost.appendChild(el("div", { cls: "charts" }, [categoryChart(), distributionChart()]));
      summaryHost.appendChild(el("h3", { text: "Metrics overall and per category" }));
      summaryHost.appendChild(metricsTable(run));
      var pk = passKTable(run);
      if (pk) summaryHost.appendChild(pk);
      var flips = flipSection(run, r);
      if (flips) summaryHost.appendChild(flips);
    });
    if (runs.length > 1) {
      summaryHost.appendChild(el("h2", { text: "Charts" }));
      summaryHost.appendChild(el("div", { cls: "charts" }, [categoryChart(), distributionChart()]));
    }
  }

  // ---- the task table (virtualised: only the visible rows exist) ------------------------------------------
  function columns() {
    var multi = runs.length > 1, trials = runs.some(function (r) { return (r.header.trials || 1) > 1; });
    var cols = [{ key: "task_id", label: "task", w: "minmax(160px, 2fr)" }];
    if (trials) cols.push({ key: "trial", label: "trial", w: "52px", num: true });
    cols.push({ key: "category", label: "category", w: "minmax(90px, 1fr)" });
    if (!multi) {
      cols.push({ key: "status", label: "status", w: "120px" },
        { key: "score", label: labelOf(runs[0], primaryOf(runs[0])), w: "80px", num: true },
        { key: "flags", label: "flags", w: "minmax(90px, 1fr)" },
        { key: "error", label: "error (phase) / answer", w: "minmax(200px, 3fr)" },
        { key: "attempt", label: "attempts", w: "70px", num: true },
        { key: "seconds", label: "time", w: "70px", num: true },
        { key: "calls", label: "calls", w: "56px", num: true },
        { key: "tokens", label: "tokens", w: "76px", num: true },
        { key: "cost", label: "cost", w: "76px", num: true });
    } else {
      runs.forEach(function (_, r) {
        cols.push({ key: "status" + r, label: "status " + String.fromCharCode(65 + r), w: "116px" },
                  { key: "score" + r, label: "score " + String.fromCharCode(65 + r), w: "76px", num: true });
      });
      cols.push({ key: "delta", label: "last − A", w: "76px", num: true });
    }
    return cols;
  }
  var COLS = null;
  var statusSel, catSel, flagSel, headHost;
  function flagList(flags) { return flags ? String(flags).split(", ") : []; }
  function options(select, first, values) {
    // Replace a select's options, keeping its element (and focus) and its value when it still exists.
    var keep = select.value;
    select.textContent = "";
    first.concat(values.map(function (v) { return [v, v]; })).forEach(function (o) {
      select.appendChild(el("option", { value: o[0], text: o[1] }));
    });
    select.value = keep;
    if (select.value !== keep) select.value = "";
  }
  function refreshFilterOptions() {
    var statuses = {}, cats = {};
    records.forEach(function (recs) { recs.forEach(function (o) { statuses[o.status] = 1; if (o.category) cats[o.category] = 1; }); });
    options(statusSel, [["", "every status"], ["ERROR", "any error"]], Object.keys(statuses).sort());
    options(catSel, [["", "every category"]], Object.keys(cats).sort());
    var scanners = {};
    records.forEach(function (recs) { recs.forEach(function (o) { flagList(o.flags).forEach(function (f) { scanners[f] = 1; }); }); });
    options(flagSel, [["", "flagged or not"], ["FLAGGED", "any flag"], ["UNFLAGGED", "no flag"]], Object.keys(scanners).sort());
    view.status = statusSel.value; view.category = catSel.value; view.flag = flagSel.value;
  }
  function renderHead() {
    COLS = columns();
    headHost.textContent = "";
    COLS.forEach(function (c) {
      headHost.appendChild(el("div", { cls: (c.num ? "num" : "") + (view.sort === c.key ? " sorted" : ""), "data-key": c.key,
        text: c.label + (view.sort === c.key ? (view.desc ? " ▼" : " ▲") : ""),
        on: { click: function () { if (view.sort === c.key) view.desc = !view.desc; else { view.sort = c.key; view.desc = false; } renderHead(); applyFilter(); } } }));
    });
    headHost.style.gridTemplateColumns = COLS.map(function (c) { return c.w; }).join(" ");
  }
  function renderTableShell() {
    tableHost.textContent = "";
    statusSel = el("select", { id: "filter-status", "aria-label": "status", on: { change: function (e) { view.status = e.target.value; applyFilter(); } } });
    catSel = el("select", { id: "filter-category", "aria-label": "category", on: { change: function (e) { view.category = e.target.value; applyFilter(); } } });
    flagSel = el("select", { id: "filter-flag", "aria-label": "scanner flags", on: { change: function (e) { view.flag = e.target.value; applyFilter(); } } });
    var timer = null;
    var text = el("input", { id: "filter-text", type: "search", placeholder: "filter by task, error or answer text",
      on: { input: function (e) { clearTimeout(timer); var v = e.target.value; timer = setTimeout(function () { view.text = v.toLowerCase(); applyFilter(); }, 60); } } });
    countEl = el("span", { cls: "muted small", id: "task-count" });
    headHost = el("div", { cls: "thead", id: "task-head" });
    scrollBox = el("div", { cls: "tscroll", id: "task-scroll" });
    spacer = el("div", { cls: "tspacer", id: "task-rows" });
    scrollBox.appendChild(spacer);
    scrollBox.addEventListener("scroll", scheduleRows);
    tableHost.appendChild(el("h2", { text: "Tasks" }));
    tableHost.appendChild(el("div", { cls: "filters" }, [statusSel, catSel, flagSel, text, countEl,
      el("span", { cls: "muted small", text: "click a column to sort, a task to see its conversation" })]));
    tableHost.appendChild(el("div", { cls: "tasks" }, [headHost, scrollBox]));
    refreshFilterOptions();
    renderHead();
    applyFilter();
  }
  function matches(o) {
    if (view.category && o.category !== view.category) return false;
    if (view.flag) {
      var fl = flagList(o.flags);
      if (view.flag === "FLAGGED" ? !fl.length : view.flag === "UNFLAGGED" ? fl.length : fl.indexOf(view.flag) < 0) return false;
    }
    if (view.status) {
      var st = runs.length > 1 ? o.statuses : [o.status];
      var ok = st.some(function (s) { return view.status === "ERROR" ? isError(s) : s === view.status; });
      if (!ok) return false;
    }
    return !view.text || o.search.indexOf(view.text) >= 0;
  }
  function applyFilter() {
    var t0 = performance.now();
    filtered = table.filter(matches);
    if (view.sort) {
      var k = view.sort, dir = view.desc ? -1 : 1;
      filtered.sort(function (a, b) {
        var x = a[k], y = b[k];
        if (x == null && y == null) return 0;
        if (x == null) return 1;
        if (y == null) return -1;
        return (x < y ? -1 : x > y ? 1 : 0) * dir;
      });
    }
    countEl.textContent = "showing " + fmtInt(filtered.length) + " of " + fmtInt(table.length);
    spacer.style.height = Math.max(filtered.length * ROW_H, 1) + "px";
    scrollBox.style.height = filtered.length < 20 ? Math.max(filtered.length, 3) * ROW_H + 4 + "px" : "";
    renderedRange = null;
    renderRows();
    probe.filters += 1;
    probe.lastFilterMs = performance.now() - t0;
  }
  var pending = false, renderedRange = null;
  function scheduleRows() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; renderRows(); });
  }
  function cell(o, c) {
    var v = o[c.key], d = el("div", { cls: c.num ? "num" : null });
    if (c.key === "status" || /^status\d+$/.test(c.key)) { append(d, v ? statusEl(v) : el("span", { cls: "muted", text: "not run" })); return d; }
    if (c.key === "score" || /^score\d+$/.test(c.key)) {
      var st = c.key === "score" ? o.status : o["status" + c.key.slice(5)];
      if (isError(st)) { d.className += " errtext"; d.textContent = "error"; } else d.textContent = fmt(v);
      return d;
    }
    if (c.key === "delta") { d.textContent = v == null ? "–" : (v > 0 ? "+" : "") + fmt(v); return d; }
    if (c.key === "error") {
      if (o.error) { d.className = "errtext"; d.textContent = (o.phase ? "[" + o.phase + "] " : "") + o.error; }
      else { d.className = "muted"; d.textContent = o.answer || ""; }
      d.title = d.textContent;
      return d;
    }
    if (c.key === "flags") { d.className = v ? "errtext" : "muted"; d.textContent = v || ""; d.title = v || ""; return d; }
    if (c.key === "seconds") { d.textContent = fmtSeconds(v); return d; }
    if (c.key === "cost") { d.textContent = v == null ? "–" : fmtCost(v); return d; }
    if (c.key === "tokens" || c.key === "calls") { d.textContent = fmtInt(v); return d; }
    d.textContent = v == null ? "" : String(v);
    if (c.key === "task_id") d.title = String(v);
    return d;
  }
  function renderRows() {
    var top = scrollBox.scrollTop, h = scrollBox.clientHeight || 600;
    var first = Math.max(0, Math.floor(top / ROW_H) - 8), last = Math.min(filtered.length, Math.ceil((top + h) / ROW_H) + 8);
    if (renderedRange && renderedRange[0] === first && renderedRange[1] === last) return;
    renderedRange = [first, last];
    var frag = document.createDocumentFragment(), tmpl = COLS.map(function (c) { return c.w; }).join(" ");
    if (!filtered.length) frag.appendChild(el("div", { cls: "empty", text: table.length ? "No task matches these filters." : "No result yet." }));
    for (var i = first; i < last; i++) {
      var o = filtered[i];
      var a = el("a", { cls: "trow", href: runs.length > 1 ? "#cmp/" + o.index : "#task/" + o.key, "data-task": o.task_id });
      a.style.top = (i * ROW_H) + "px";
      a.style.gridTemplateColumns = tmpl;
      COLS.forEach(function (c) { a.appendChild(cell(o, c)); });
      frag.appendChild(a);
    }
    spacer.textContent = "";
    spacer.appendChild(frag);
  }

  // ---- the task detail ---------------------------------------------------------------------------------------
  function loadDetail(key, done) {
    if (detailCache[key]) { done(detailCache[key]); return; }
    if (!LIVE) {
      var block = document.getElementById("d-" + key);
      var value = block ? JSON.parse(block.textContent) : null;
      detailCache[key] = value;
      done(value);
      return;
    }
    fetch("api/task/" + key, { cache: "no-store" }).then(function (r) { return r.ok ? r.json() : null; })
      .then(function (v) { done(v); }, function () { done(null); });
  }
  function route() {
    var hash = location.hash || "";
    var m = /^#task\/(\d+)-(\d+)$/.exec(hash), c = /^#cmp\/(\d+)$/.exec(hash);
    if (m && records[+m[1]] && records[+m[1]][+m[2]]) { showDetail([records[+m[1]][+m[2]]]); return; }
    if (c && table[+c[1]]) {
      var merged = table[+c[1]];
      showDetail(runs.map(function (_, r) { return merged.cells[r] || null; }), merged);
      return;
    }
    detailView.textContent = "";
    mainView.style.display = "";
  }
  function showDetail(recs, merged) {
    mainView.style.display = "none";
    detailView.textContent = "";
    var any = merged || recs[0];
    detailView.appendChild(el("a", { cls: "back", href: "#", id: "back", text: "← all tasks" }));
    detailView.appendChild(el("h2", { id: "detail-title", text: "Task " + any.task_id + (runs.some(function (r) { return r.header.trials > 1; }) ? " · trial " + any.trial : "") +
      (any.category ? " · " + any.category : "") }));
    var host = el("div", { cls: "side" });
    host.style.gridTemplateColumns = "repeat(" + recs.length + ", minmax(0, 1fr))";
    detailView.appendChild(host);
    recs.forEach(function (rec, r) {
      var col = el("div", { cls: "detail-col" });
      host.appendChild(col);
      if (recs.length > 1) col.appendChild(el("h3", null, [swatch(r), "Run " + String.fromCharCode(65 + r) + ": " + runs[r].header.run_id]));
      if (!rec) { col.appendChild(el("div", { cls: "box note", text: "This run has no result for this task." })); return; }
      if (rec.unfinished) { col.appendChild(el("div", { cls: "box note", text: "Unfinished: this task (trial) has no final result yet — the run was interrupted or stopped before it finished. agentcompass run --resume " + runs[rec.run].header.path + " runs it." })); return; }
      col.appendChild(el("p", { cls: "muted", text: "loading…" }));
      loadDetail(rec.key, function (d) {
        col.removeChild(col.lastChild);
        if (!d) { col.appendChild(el("div", { cls: "box err", text: "This task's detail could not be loaded." })); return; }
        renderDetail(col, rec, d, runs[rec.run]);
      });
    });
    window.scrollTo(0, 0);
  }
  function jsonText(v) { return typeof v === "string" ? v : JSON.stringify(v, null, 2); }
  function cutNote(n) { return n ? el("div", { cls: "cut", text: "[" + fmtInt(n) + " characters cut from this page]" }) : null; }
  function renderDetail(col, rec, d, run) {
    var res = d.result, primary = primaryOf(run);
    col.appendChild(el("div", { cls: "chips" }, [
      el("span", { cls: "chip " + (isError(res.status) ? "err" : "ok"), id: "detail-status", text: res.status }),
      el("span", { cls: "chip", text: labelOf(run, primary) + ": " + (isError(res.status) ? "error (counts as 0)" : fmt((res.metrics || {})[primary])) }),
      el("span", { cls: "chip", text: "attempt " + res.attempt }), el("span", { cls: "chip", text: "seed " + (res.seed == null ? "–" : res.seed) }),
    ]));
    if (res.error) {
      col.appendChild(el("div", { cls: "box err", id: "detail-error" }, [
        el("b", { text: "Error" + (res.error_phase ? " in phase " + res.error_phase : "") + ": " }),
        el("pre", { text: jsonText(res.error) }), cutNote(res.error_cut)]));
    }
    col.appendChild(el("h3", { text: "Final answer" }));
    col.appendChild(el("div", { cls: "box", id: "detail-answer" }, [
      res.final_answer == null ? el("span", { cls: "muted", text: "(none)" }) : el("pre", { text: jsonText(res.final_answer) }), cutNote(res.final_answer_cut)]));
    var metrics = res.metrics || {};
    col.appendChild(el("h3", { text: "Metrics" }));
    var mkeys = Object.keys(metrics);
    col.appendChild(mkeys.length ? el("table", { cls: "grid", id: "detail-metrics" }, el("tbody", null, mkeys.map(function (k) {
      return el("tr", null, [el("td", { text: labelOf(run, k) }), el("td", { cls: "num", text: fmt(metrics[k]) })]); })))
      : el("p", { cls: "muted", text: isError(res.status) ? (res.status === "EVAL_ERROR" ? "none: scoring failed (see the error)" : "none: the task errored before it was scored") : "none" }));
    var evaluation = (res.artifacts || {}).evaluation;
    if (evaluation) col.appendChild(el("details", null, [el("summary", { text: "Score components (artifacts.evaluation)" }), el("pre", { text: jsonText(evaluation) })]));
    col.appendChild(el("details", null, [el("summary", { text: "All artifacts" }), el("pre", { text: jsonText(res.artifacts) }), cutNote(res.artifacts_cut)]));
    if (d.recording) col.appendChild(player(d.recording));
    // attempts and trials
    col.appendChild(el("h3", { text: "Attempts and trials" }));
    var att = (d.attempts || []).map(function (a) {
      return el("li", null, ["attempt " + a.attempt + ": ", statusEl(a.status), a.error ? el("span", { cls: "errtext", text: " " + (a.error_phase ? "[" + a.error_phase + "] " : "") + jsonText(a.error) }) : null]);
    });
    att.push(el("li", null, ["attempt " + res.attempt + " (final): ", statusEl(res.status)]));
    col.appendChild(el("ul", { id: "detail-attempts" }, att));
    var trials = records[rec.run].filter(function (o) { return o.task_id === rec.task_id && o.key !== rec.key; });
    if (trials.length) {
      col.appendChild(el("div", null, ["Other trials of this task: "].concat(trials.map(function (o) {
        return el("a", { href: "#task/" + o.key, text: " trial " + o.trial + " (" + o.status + (isError(o.status) ? "" : ", " + fmt(o.score)) + ") " }); }))));
    }
    // timings
    var timings = res.timings || {}, total = timings.total || 0, tk = Object.keys(timings).filter(function (k) { return k !== "total"; });
    col.appendChild(el("h3", { text: "Time per phase (total " + fmtSeconds(timings.total) + ")" }));
    col.appendChild(el("table", { cls: "grid", id: "detail-timings" }, el("tbody", null, tk.map(function (k) {
      var bar = el("span", { cls: "bar" }); bar.style.width = Math.max(1, 160 * (timings[k] || 0) / (total || 1)) + "px";
      return el("tr", null, [el("td", { text: k }), el("td", { cls: "num", text: fmtSeconds(timings[k]) }), el("td", null, bar)]); }))));
    var usage = (res.usage || {}).models || {};
    if (Object.keys(usage).length) {
      col.appendChild(el("h3", { text: "Model usage" }));
      col.appendChild(el("table", { cls: "grid" }, [
        el("thead", null, el("tr", null, ["role", "calls", "prompt tokens", "completion tokens", "latency", "errors", "cost"].map(function (t, i) { return el("th", { cls: i ? "num" : null, text: t }); }))),
        el("tbody", null, Object.keys(usage).map(function (role) { var u = usage[role]; return el("tr", null, [
          el("td", { text: role }), el("td", { cls: "num", text: fmtInt(u.calls) }), el("td", { cls: "num", text: fmtInt(u.prompt_tokens) }),
          el("td", { cls: "num", text: fmtInt(u.completion_tokens) }), el("td", { cls: "num", text: fmtSeconds(u.latency_s) }),
          el("td", { cls: "num", text: fmtInt(u.errors) }), el("td", { cls: "num", text: u.cost_usd == null ? "unknown" : fmtCost(u.cost_usd) })]); }))]));
    }
    renderFindings(col, d.findings || []);
    renderConversation(col, d.conversation || { calls: [] });
  }
  // ---- steering the live run (view on loopback only: the server hands the page a token) -----------------------
  function controlBar(control) {
    var message = el("span", { cls: "muted small", id: "ctl-message" });
    function ask(body) {
      message.textContent = "…";
      fetch("/api/ctl/0", { method: "POST", headers: { "Content-Type": "application/json", "X-Agentcompass-Control": control.token },
                            body: JSON.stringify(body) })
        .then(function (r) { return r.json().catch(function () { return { ok: false, error: "HTTP " + r.status }; }); })
        .then(function (reply) { message.textContent = reply.ok ? reply.message : "refused: " + reply.error; })
        .catch(function (e) { message.textContent = "failed: " + e; });
    }
    function button(id, text, body) {
      var b = el("button", { type: "button", id: id, text: text });
      b.addEventListener("click", function () { ask(body()); });
      return b;
    }
    var concurrency = el("input", { type: "number", min: "1", id: "ctl-concurrency", size: "4" });
    return el("div", { cls: "box", id: "ctl-bar" }, [
      el("b", { text: "Steer this run: " }),
      button("ctl-pause", "Pause", function () { return { action: "pause" }; }), " ",
      button("ctl-pause-now", "Pause now", function () { return { action: "pause", now: true }; }), " ",
      button("ctl-resume", "Resume", function () { return { action: "resume" }; }), " ",
      button("ctl-drain", "Drain", function () { return { action: "drain" }; }), " · concurrency ",
      concurrency, " ",
      button("ctl-set-concurrency", "Set", function () { return { action: "set", name: "concurrency", value: concurrency.value }; }), " ",
      message]);
  }

  // ---- a terminal recording (asciicast v2, the human harness's session.cast): a minimal replay ----------------
  // Enough of a terminal for a shell session: escape sequences are dropped, \r returns, \n and \b move, text
  // overwrites; typed input is shown by the echo the shell makes, as on the screen.
  function screenOf(lines, pos, text) {
    text = text.replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "").replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "").replace(/\x1b[()][A-Za-z0-9]|\x1b[=>78]/g, "");
    for (var i = 0; i < text.length; i++) {
      var ch = text[i];
      if (ch === "\r") pos.col = 0;
      else if (ch === "\n") { pos.row += 1; if (pos.row >= lines.length) lines.push(""); }
      else if (ch === "\b") pos.col = Math.max(0, pos.col - 1);
      else if (ch >= " " || ch === "\t") {
        var line = lines[pos.row];
        while (line.length < pos.col) line += " ";
        lines[pos.row] = line.slice(0, pos.col) + ch + line.slice(pos.col + 1);
        pos.col += 1;
      }
    }
  }
  function player(rec) {
    var out = rec.events.filter(function (e) { return e[1] === "o"; });
    var screen = el("pre", { cls: "term", id: "detail-recording" });
    var clock = el("span", { cls: "muted small" });
    var at = 0, timer = null, speed = 1, lines = [""], pos = { row: 0, col: 0 };
    var last = out.length ? out[out.length - 1][0] : 0;
    function draw() { screen.textContent = lines.join("\n"); clock.textContent = " " + fmtSeconds(at < out.length ? out[at][0] : last) + " / " + fmtSeconds(last); screen.scrollTop = screen.scrollHeight; }
    function step() {
      timer = null;
      if (at >= out.length) { button.textContent = "Replay"; return; }
      screenOf(lines, pos, out[at][2]); at += 1; draw();
      if (at < out.length) timer = setTimeout(step, Math.min(2000, (out[at][0] - out[at - 1][0]) * 1000 / speed));
      else button.textContent = "Replay";
    }
    function reset() { at = 0; lines = [""]; pos = { row: 0, col: 0 }; }
    var button = el("button", { type: "button", text: "Play" });
    button.addEventListener("click", function () {
      if (timer) { clearTimeout(timer); timer = null; button.textContent = "Play"; return; }
      if (at >= out.length) reset();
      button.textContent = "Pause"; step();
    });
    var all = el("button", { type: "button", text: "Show the end" });
    all.addEventListener("click", function () { if (timer) clearTimeout(timer); timer = null; while (at < out.length) { screenOf(lines, pos, out[at][2]); at += 1; } button.textContent = "Replay"; draw(); });
    var pace = el("select", null, [1, 2, 4, 8].map(function (x) { return el("option", { value: String(x), text: x + "×" }); }));
    pace.addEventListener("change", function () { speed = Number(pace.value); });
    draw();
    var h = rec.header || {};
    return el("div", { cls: "box", id: "detail-player" }, [
      el("h3", { text: "Terminal session" + (h.width ? " (" + h.width + "×" + h.height + ")" : "") }),
      el("div", null, [button, " ", all, " ", pace, clock]), screen,
      rec.cut ? el("div", { cls: "cut", text: "[the recording was cut: only its first part plays]" }) : null]);
  }
  function renderFindings(col, findings) {
    // The scanners' findings of the final attempt (scans.jsonl), beside the conversation they point into.
    if (!findings.length) return;
    col.appendChild(el("h3", { text: "Flagged by the scanners (" + findings.length + ")" }));
    col.appendChild(el("ul", { cls: "box err", id: "detail-findings" }, findings.map(function (f) {
      var ev = (f.evidence || [])[0] || {};
      var where = ev.where ? ev.where + (ev.index != null ? " " + ev.index : ev.path ? " " + ev.path : "") : "";
      return el("li", { "data-scanner": f.scanner }, [
        el("b", { text: f.scanner }), " ", el("span", { cls: "chip", text: f.severity }), " " + f.reason,
        where ? el("span", { cls: "muted", text: " (" + where + ")" }) : null,
        ev.excerpt ? el("pre", { text: ev.excerpt }) : null]);
    })));
  }
  function renderConversation(col, conv) {
    col.appendChild(el("h3", { text: "Trajectory: " + plural(conv.calls.length, "model call") }));
    if (conv.cut) {
      col.appendChild(el("div", { cls: "box note", id: "trajectory-cut", text: "Cut to fit this page: " +
        (conv.cut.calls_dropped ? plural(conv.cut.calls_dropped, "call") + " shown by their numbers only; " : "") +
        plural(conv.cut.texts_shortened, "text") + " shortened (" + fmtInt(conv.cut.chars_cut) + " characters left out). " +
        (LIVE ? "" : "agentcompass view shows the whole trajectory; trajectories.jsonl holds it all.") }));
    }
    if (!conv.calls.length) { col.appendChild(el("p", { cls: "muted", text: "No model call was recorded for this task." })); return; }
    var host = el("div", { id: "trajectory" });
    var lastAttempt = null;
    conv.calls.forEach(function (c) {
      if (c.attempt !== lastAttempt && conv.calls.some(function (x) { return x.attempt !== c.attempt; })) {
        host.appendChild(el("h3", { text: "Attempt " + c.attempt }));
      }
      lastAttempt = c.attempt;
      var head = el("div", { cls: "callhead" }, [
        el("b", { text: "call " + (c.index + 1) }), el("span", { text: "role " + (c.role || "?") }), el("span", { text: c.model || "" }),
        el("span", { text: "tokens " + fmtInt(c.prompt_tokens) + " in / " + fmtInt(c.completion_tokens) + " out" }),
        el("span", { text: "latency " + fmtSeconds(c.latency_s) }),
        el("span", { text: "cost " + (c.cost_usd == null ? "unknown" : fmtCost(c.cost_usd)) }),
        c.finish_reason ? el("span", { text: "finish " + c.finish_reason }) : null,
        c.retries > 1 ? el("span", { text: c.retries + " HTTP attempts" }) : null,
        c.truncated ? el("span", { cls: "cut", text: "cut when recorded: " + jsonText(c.truncated) }) : null,
      ]);
      var body = el("div", { cls: "msgs" });
      if (c.dropped) body.appendChild(el("div", { cls: "cut", text: "messages of this call cut to fit the page" }));
      else {
        if (c.skipped) body.appendChild(el("div", { cls: "muted small", text: plural(c.skipped, "earlier message") + " as above" }));
        (c.messages || []).forEach(function (m) { body.appendChild(message(m)); });
        if (c.response) body.appendChild(message(c.response, true));
      }
      if (c.error) body.appendChild(el("div", { cls: "box err", text: "call failed: " + c.error }));
      host.appendChild(el("div", { cls: "call" }, [head, body]));
    });
    col.appendChild(host);
  }
  function message(m, isResponse) {
    var role = m.role || "?";
    var box = el("div", { cls: "msg " + (["system", "user", "assistant", "tool"].indexOf(role) >= 0 ? role : "system") + (isResponse ? " response" : "") }, [
      el("div", { cls: "who" }, [role + (m.name ? " " + m.name : "") + (isResponse ? " · reply" : ""),
        m.tool_call_id ? el("span", { cls: "callid", text: " · result of " + m.tool_call_id }) : null]),
    ]);
    if (m.content) box.appendChild(el("pre", { cls: "content", text: m.content }));
    if (m.content_cut) box.appendChild(cutNote(m.content_cut));
    (m.tool_calls || []).forEach(function (t) {
      box.appendChild(el("div", { cls: "toolcall" }, [el("b", { cls: "mono", text: "→ " + t.name }), el("pre", { text: t.arguments || "" }),
        cutNote(t.arguments_cut),
        t.id ? el("div", { cls: "muted small", text: t.id }) : null]));
    });
    return box;
  }

  // ---- live updates (view) -----------------------------------------------------------------------------------
  function poll() {
    fetch("api/summary", { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (s) {
      if (s.version === lastVersion) { schedule(); return; }
      lastVersion = s.version;
      var loads = s.runs.map(function (info, r) {
        var have = runs[r].rows.length;
        return fetch("api/tasks?run=" + r + "&from=" + have + "&replaced=" + (runs[r].replaced || 0), { cache: "no-store" })
          .then(function (x) { return x.json(); }).then(function (t) {
            runs[r].rows = t.from === 0 ? t.rows : runs[r].rows.concat(t.rows);
            runs[r].replaced = t.replaced;
            runs[r].header = info.header; runs[r].summary = info.summary; runs[r].live = info.live; runs[r].warnings = info.warnings;
            runs[r].unfinished = info.unfinished || [];
          });
      });
      probe.polls += 1;
      Promise.all(loads).then(function () {
        DATA.comparisons = s.comparisons;
        updatedAt = new Date();
        refreshAll();
        schedule();
      }, schedule);
    }, function () { liveEl.textContent = "live: the viewer stopped answering"; schedule(); });
  }
  function schedule() { setTimeout(poll, 1000); }
  function refreshAll() {
    // The summary is drawn again; the table keeps its filters, sort, scroll position and focus.
    buildTable();
    renderSummary();
    refreshFilterOptions();
    renderHead();
    applyFilter();
    var done = runs.every(function (r) { return !r.live; });
    liveEl.textContent = (done ? "live: run finished" : "live: refreshes as results arrive") + " · " + fmtInt(table.length) +
      " results · updated " + updatedAt.toLocaleTimeString();
  }

  window.addEventListener("hashchange", route);
  buildTable();
  build();
  if (LIVE) { runs.forEach(function (r) { r.replaced = 0; }); poll(); }
  probe.rows = function () { return table.length; };
  probe.finished = function () { return table.filter(function (o) { return !o.unfinished; }).length; };
  probe.shown = function () { return filtered.length; };
  probe.ready = true;
  probe.readyAt = performance.now();
  document.body.setAttribute("data-ready", "1");
})();
