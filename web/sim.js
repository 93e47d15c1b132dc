/*
 * sim.js - the simulator page (sim.html). It keeps the arrival times and
 * asks weir to decide the whole trace (POST /admin/v1/sim) every time
 * something changes; every verdict, count and state shown comes from that
 * answer. No decision is made here.
 */
"use strict";

(function () {
  const MAX_ARRIVALS = 10000;
  const MAX_BODY = 64 * 1024;
  const LOG_LINES = 20;
  const SVG = "http://www.w3.org/2000/svg";

  const NAMES = {
    token_bucket: ["Token bucket", "A bucket of burst tokens refilled at the rate; each request takes one."],
    gcra: ["GCRA", "One timestamp: the theoretical arrival time of the next request; burst 1 spaces requests evenly."],
    leaky_bucket: ["Leaky bucket (policer)", "Water drains at the rate; a request that would overflow the bucket is denied."],
    leaky_bucket_shaper: ["Leaky bucket (shaper)", "Requests queue and leave at the rate: admitted with a delay, denied when the queue is full."],
    fixed_window: ["Fixed window", "A counter per window aligned to the clock; it resets at each edge."],
    sliding_window_log: ["Sliding log", "The time of every admitted request in the last window: exact, never over the limit."],
    sliding_window_counter: ["Sliding counter", "This window's count plus the previous one's, weighted by how much of it is still inside."],
    concurrency: ["Concurrency", "Leases in flight: each admitted request holds one until it is released (after the hold) or times out (after the window)."],
  };

  /* The state's numbers: a label and how to show the value. */
  const NUMBERS = {
    tokens_milli: ["tokens", "milli"], queue_milli: ["queued", "milli"],
    level_milli: ["water", "milli"], estimate_milli: ["estimate", "milli"],
    burst: ["burst", "n"], queue: ["queue size", "n"], remaining: ["remaining", "n"],
    full_in_us: ["full in", "dur_us"], empty_in_us: ["empty in", "dur_us"],
    wait_us: ["next waits", "dur_us"], rest_in_us: ["at rest in", "dur_us"],
    level_units: ["level (units)", "n"], unit: ["units per request", "n"],
    last_us: ["last drained", "time_us"], tat_ns: ["TAT", "time_ns"],
    interval_ns: ["interval", "dur_ns"], tolerance_ns: ["tolerance", "dur_ns"],
    backlog_ns: ["backlog", "dur_ns"], window: ["stored window #", "n"],
    count: ["stored count", "n"], window_start_us: ["window starts", "time_us"],
    window_end_us: ["window ends", "time_us"], count_now: ["count now", "n"],
    stored: ["entries stored", "n"], in_window: ["in window", "n"],
    oldest_us: ["oldest", "time_us"], newest_us: ["newest", "time_us"],
    window_us: ["window", "dur_us"], sub_window_us: ["sub-window", "dur_us"],
    sub_windows: ["sub-windows", "n"], current: ["current #", "n"],
    elapsed_us: ["into it", "dur_us"], full: ["full sub-windows", "n"],
    previous: ["previous", "n"], held: ["held", "n"], leases: ["leases", "n"],
    last_id: ["last lease id", "n"], lease_timeout_us: ["lease timeout", "dur_us"],
    /* the tables' columns */
    t_us: ["admitted at", "time_us"], start_us: ["starts", "time_us"],
    expires_us: ["expires", "time_us"],
  };

  const $ = (id) => document.getElementById(id);
  const sim = {
    start: performance.now(),
    skipped: 0,        /* ms the clock jumped ahead (boundary bursts) */
    arrivals: [],      /* t_ms, non-decreasing */
    busy: false,       /* a request in flight */
    again: false,      /* something changed while it was */
    answer: null,
    autoTimer: null,
    autoCarry: 0,
    autoLast: 0,
    refreshTimer: null,
  };

  function nowMs() {
    return Math.floor(performance.now() - sim.start + sim.skipped);
  }

  function intOf(id, fallback) {
    const v = $(id).value.trim();
    if (v === "") return fallback;
    const n = Number(v);
    return Number.isInteger(n) ? n : NaN;
  }

  function limitOf() {
    const l = { requests_per_unit: intOf("limit", NaN), window_ms: intOf("window", NaN) };
    const burst = intOf("burst", null), sub = intOf("subwindows", null), hold = intOf("hold", null);
    if (burst !== null) l.burst = burst;
    if (sub !== null) l.sub_windows = sub;
    if (hold !== null) l.hold_ms = hold;
    return l;
  }

  function chosen() {
    return Array.from(document.querySelectorAll("input[name=algo]:checked"), (c) => c.value);
  }

  function windowMs() {
    const w = intOf("window", 1000);
    return Number.isInteger(w) && w > 0 ? w : 1000;
  }

  /* ------------------------------------------------------------ arrivals */

  function bodyOf(arrivals) {
    return JSON.stringify({ limit: limitOf(), algorithms: chosen(), arrivals: arrivals,
                            now_ms: Math.max(nowMs(), arrivals.length ? arrivals[arrivals.length - 1] : 0),
                            state_steps: 0 });
  }

  /* Adds arrivals (times in ms, in order, none before the last); false
   * when the trace would pass a cap. */
  function add(times) {
    const next = sim.arrivals.concat(times);
    if (next.length > MAX_ARRIVALS || bodyOf(next).length > MAX_BODY) {
      stopAuto();
      say("The trace is full (" + sim.arrivals.length + " arrivals; at most " +
          MAX_ARRIVALS.toLocaleString("en") + " in a 64 KiB request): Reset to start again.");
      return false;
    }
    sim.arrivals = next;
    decide();
    return true;
  }

  function burstN() {
    const n = intOf("burstn", 8);
    return Number.isInteger(n) && n >= 1 ? Math.min(n, 1000) : 8;
  }

  function send1() {
    add([nowMs()]);
  }

  function sendBurst() {
    const t = nowMs();
    add(new Array(burstN()).fill(t));
  }

  /* N requests just before the next window edge and N from it on: the
   * clock jumps to N ms before the edge (spacing 1 ms, less when N ms is
   * over a tenth of the window). */
  function boundary() {
    const n = burstN(), w = windowMs();
    const spacing = n <= w / 10 ? 1 : Math.floor(w / (10 * n));
    const lead = n * spacing;
    const t = nowMs();
    let edge = Math.ceil((t + lead + 1) / w) * w;
    const times = [];
    for (let i = 0; i < n; i++) times.push(edge - lead + i * spacing);
    for (let i = 0; i < n; i++) times.push(edge + i * spacing);
    const jump = times[times.length - 1] - t;
    if (add(times)) {
      sim.skipped += jump;
      say("Boundary burst: " + n + " before the edge at " + secs(edge) + " and " + n + " after it.");
    }
  }

  function toggleAuto() {
    if (sim.autoTimer) {
      stopAuto();
      return;
    }
    sim.autoLast = nowMs();
    sim.autoCarry = 0;
    sim.autoTimer = setInterval(autoTick, 50);
    $("auto").textContent = "Stop auto-load";
    $("auto").setAttribute("aria-pressed", "true");
  }

  /* Arrivals at the rate, evenly spaced on the page's clock. */
  function autoTick() {
    const rate = Number($("rate").value);
    if (!(rate > 0)) return;
    const step = 1000 / rate, now = nowMs(), times = [];
    let t = sim.autoLast + sim.autoCarry;
    while (t + step <= now) {
      t += step;
      times.push(Math.floor(t));
    }
    sim.autoCarry = t - now;
    sim.autoLast = now;
    if (times.length) add(times);
  }

  function stopAuto() {
    if (!sim.autoTimer) return;
    clearInterval(sim.autoTimer);
    sim.autoTimer = null;
    $("auto").textContent = "Start auto-load";
    $("auto").setAttribute("aria-pressed", "false");
  }

  function reset() {
    stopAuto();
    sim.arrivals = [];
    sim.start = performance.now();
    sim.skipped = 0;
    say("Reset: no arrivals, the clock at 0.");
    decide();
  }

  /* ------------------------------------------------------------ deciding */

  function decide() {
    if (!chosen().length) {
      $("results").replaceChildren();
      say("Pick at least one algorithm.");
      return;
    }
    if (!limitValid()) return;
    if (sim.busy) {
      sim.again = true;
      return;
    }
    sim.busy = true;
    sim.again = false;
    const body = bodyOf(sim.arrivals);
    fetch("/admin/v1/sim", { method: "POST", headers: { "Content-Type": "application/json" }, body: body })
      .then((r) => r.json().then((j) => ({ ok: r.ok, j: j })))
      .then(({ ok, j }) => {
        if (!ok) {
          showError((j.field ? j.field + ": " : "") + (j.detail || "refused"));
          return;
        }
        hideError();
        sim.answer = j;
        render(j);
      })
      .catch((e) => showError("weir did not answer: " + e.message))
      .finally(() => {
        sim.busy = false;
        if (sim.again) decide();
        else scheduleRefresh();
      });
  }

  /* The limit's inputs within their bounds (the browser's own checks of
   * min, max, step and required), or the first one's problem shown. */
  function limitValid() {
    for (const id of ["limit", "window", "burst", "subwindows", "hold"]) {
      const e = $(id);
      e.setAttribute("aria-invalid", String(!e.checkValidity()));
      if (!e.checkValidity()) {
        showError(e.labels[0].firstChild.textContent.trim() + ": " + e.validationMessage);
        return false;
      }
    }
    return true;
  }

  /* While time passes after the last arrival, buckets refill and windows
   * end: ask again now and then, for a while. */
  function scheduleRefresh() {
    clearTimeout(sim.refreshTimer);
    const last = sim.arrivals.length ? sim.arrivals[sim.arrivals.length - 1] : null;
    if (last === null || nowMs() - last > 10 * windowMs()) return;
    sim.refreshTimer = setTimeout(decide, sim.autoTimer ? 250 : 500);
  }

  /* ------------------------------------------------------------ drawing */

  function secs(ms) {
    return (ms / 1000).toFixed(3) + " s";
  }

  function dur(ms) {
    return ms >= 10000 ? (ms / 1000).toFixed(2) + " s" : (Math.round(ms * 1000) / 1000) + " ms";
  }

  function show(name, v) {
    const kind = (NUMBERS[name] || [name, "n"])[1];
    switch (kind) {
      case "milli": return (v / 1000).toFixed(3);
      case "dur_us": return dur(v / 1000);
      case "dur_ns": return dur(v / 1e6);
      case "time_us": return v < 0 ? "—" : "t=" + secs(v / 1000);
      case "time_ns": return "t=" + secs(v / 1e6);
      default: return String(v);
    }
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function card(algo) {
    let c = document.getElementById("algo-" + algo);
    if (c) return c;
    c = $("card").content.firstElementChild.cloneNode(true);
    c.id = "algo-" + algo;
    c.querySelector(".name").textContent = NAMES[algo][0];
    c.querySelector(".about").textContent = NAMES[algo][1];
    return c;
  }

  function field(c, name) {
    return c.querySelector("[data-field=" + name + "]");
  }

  function render(a) {
    const box = $("results");
    const keep = new Set();
    for (const r of a.results) {
      const c = card(r.algorithm);
      keep.add(c.id);
      box.appendChild(c); /* in the order asked for */
      fill(c, r, a);
    }
    for (const c of Array.from(box.children)) if (!keep.has(c.id)) c.remove();
    $("count").textContent = String(a.t_ms.length);
    const parts = a.results.map((r) => NAMES[r.algorithm][0] + " " + r.accepted + " accepted, " + r.denied + " denied");
    if (a.t_ms.length) say(parts.join("; ") + ".");
  }

  function fill(c, r, a) {
    const total = r.accepted + r.denied;
    field(c, "accepted").textContent = String(r.accepted);
    field(c, "denied").textContent = String(r.denied);
    field(c, "passrate").textContent = total ? Math.round((1000 * r.accepted) / total) / 10 + "%" : "—";
    field(c, "peak").textContent = r.algorithm === "concurrency" ? "—" : String(r.max_in_window);

    const st = field(c, "state");
    st.replaceChildren();
    for (const [name, v] of Object.entries(r.state.numbers)) {
      const d = el("div");
      const dt = el("dt", null, (NUMBERS[name] || [name])[0]);
      dt.appendChild(el("code", null, name));
      d.append(dt, el("dd", null, show(name, v)));
      st.appendChild(d);
    }
    const tb = field(c, "table");
    tb.replaceChildren();
    const t = r.state.table;
    if (t && t.total > 0) {
      const table = el("table");
      table.appendChild(el("caption", null, t.name + ": " + t.total + (t.total > t.rows.length ? " (newest " + t.rows.length + " shown)" : "")));
      const head = el("tr");
      for (const col of t.columns) head.appendChild(el("th", null, col));
      table.appendChild(head);
      for (const row of t.rows) {
        const tr = el("tr");
        row.forEach((v, i) => tr.appendChild(el("td", null, show(t.columns[i], v))));
        table.appendChild(tr);
      }
      tb.appendChild(table);
    }

    const log = field(c, "log");
    log.replaceChildren();
    const n = a.t_ms.length;
    if (!n) log.appendChild(el("li", "quiet", "— quiet —"));
    for (let i = n - 1; i >= Math.max(0, n - LOG_LINES); i--) {
      const ok = r.allowed[i];
      const li = el("li", ok ? "ok" : "deny");
      li.appendChild(el("span", "verdict", ok ? "OK" : "DENY"));
      let text = " t=" + secs(a.t_ms[i]);
      if (a.hits[i] !== 1) text += " ×" + a.hits[i];
      text += " remaining " + r.remaining[i];
      if (ok && r.delay_ms[i] > 0) text += ", waits " + r.delay_ms[i] + " ms";
      if (!ok) text += r.retry_after_ms[i] === null ? ", never" : ", retry in " + r.retry_after_ms[i] + " ms";
      li.appendChild(document.createTextNode(text));
      log.appendChild(li);
    }
    chart(field(c, "chart"), r, a);
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  /* Admitted in the last window at each admission (in flight, for
   * concurrency) over the last ten windows, against the limit. */
  function chart(box, r, a) {
    const W = 600, H = 170, L = 36, R = 8, T = 10, B = 24;
    const w = a.limit.window_ms, limit = a.limit.requests_per_unit;
    const conc = r.algorithm === "concurrency";
    const n = a.t_ms.length;
    let x1 = Math.max(a.now_ms, w);
    for (let i = 0; i < n; i++) x1 = Math.max(x1, a.t_ms[i] + (r.delay_ms[i] || 0));
    const x0 = Math.max(0, x1 - 10 * w);
    const pts = [], denied = [];
    let ymax = Math.max(limit, 1);
    for (let i = 0; i < n; i++) {
      if (!r.allowed[i]) {
        if (a.t_ms[i] >= x0) denied.push(a.t_ms[i]);
        continue;
      }
      const t = a.t_ms[i] + (r.delay_ms[i] || 0);
      const y = conc ? limit - r.remaining[i] : r.in_window[i];
      if (t >= x0) pts.push([t, y]);
      ymax = Math.max(ymax, y);
    }
    ymax = Math.ceil(ymax * 1.15);
    const X = (t) => L + ((W - L - R) * (t - x0)) / Math.max(1, x1 - x0);
    const Y = (y) => T + (H - T - B) * (1 - y / ymax);
    const peak = pts.reduce((m, p) => Math.max(m, p[1]), 0);
    const s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", class: "plot" });
    const what = conc ? "Requests in flight" : "Admitted in the last window";
    s.appendChild(svg("title", {}, what + " over time: peak " + peak + " against a limit of " + limit + "."));
    if ((x1 - x0) / w <= 40) {
      for (let e = Math.ceil(x0 / w) * w; e <= x1; e += w)
        s.appendChild(svg("line", { x1: X(e), x2: X(e), y1: T, y2: H - B, class: "edge" }));
    }
    s.appendChild(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
    s.appendChild(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
    s.appendChild(svg("text", { x: L - 4, y: Y(0) + 4, class: "tick", "text-anchor": "end" }, "0"));
    s.appendChild(svg("text", { x: L - 4, y: Y(ymax) + 8, class: "tick", "text-anchor": "end" }, String(ymax)));
    s.appendChild(svg("text", { x: L, y: H - 6, class: "tick" }, secs(x0)));
    s.appendChild(svg("text", { x: W - R, y: H - 6, class: "tick", "text-anchor": "end" }, secs(x1)));
    s.appendChild(svg("line", { x1: L, x2: W - R, y1: Y(limit), y2: Y(limit), class: "limit" }));
    s.appendChild(svg("text", { x: L + 4, y: Y(limit) - 4, class: "limitlabel" },
                      "limit " + limit + (conc ? " in flight" : " per " + w + " ms")));
    if (pts.length) {
      s.appendChild(svg("polyline", { points: pts.map((p) => X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1)).join(" "), class: "series" }));
      for (const p of pts.slice(-400))
        s.appendChild(svg("circle", { cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 2.5, class: p[1] > limit ? "over" : "ok" }));
    }
    for (const t of denied.slice(-400))
      s.appendChild(svg("line", { x1: X(t), x2: X(t), y1: H - B, y2: H - B + 6, class: "denied" }));
    box.replaceChildren(s);
    box.setAttribute("data-peak", String(peak));
  }

  /* ------------------------------------------------------------ page */

  function say(text) {
    $("status").textContent = text;
  }

  function showError(text) {
    const e = $("error");
    e.textContent = text;
    e.hidden = false;
  }

  function hideError() {
    $("error").hidden = true;
  }

  function tick() {
    const t = nowMs(), w = windowMs();
    $("clock").textContent = secs(t);
    const bar = $("windowbar");
    bar.max = w;
    bar.value = t % w;
  }

  function init() {
    $("send1").addEventListener("click", send1);
    $("sendburst").addEventListener("click", sendBurst);
    $("boundary").addEventListener("click", boundary);
    $("auto").addEventListener("click", toggleAuto);
    $("reset").addEventListener("click", reset);
    $("burstn").addEventListener("input", () => { $("sendburst").textContent = "Send burst (" + burstN() + ")"; });
    $("all").addEventListener("click", () => { document.querySelectorAll("input[name=algo]").forEach((c) => { c.checked = true; }); decide(); });
    $("none").addEventListener("click", () => { document.querySelectorAll("input[name=algo]").forEach((c) => { c.checked = false; }); decide(); });
    $("controls").addEventListener("change", (e) => { if (e.target.id !== "burstn" && e.target.id !== "rate") decide(); });
    $("controls").addEventListener("submit", (e) => e.preventDefault());
    setInterval(tick, 100);
    tick();
    decide();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
