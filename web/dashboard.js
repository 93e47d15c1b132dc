/*
 * weir's dashboard: polls GET /admin/v1/stats (at most once a second,
 * never two requests at once, none while the tab is hidden or paused)
 * with the admin token as a bearer header, takes rates from the
 * difference of two snapshots and draws them. Nothing here is made up:
 * what the service does not report is said to be absent.
 */
'use strict';

(function () {
  const TOKEN_KEY = 'weir.adminToken';
  const POLL_MS = 1000;
  const HISTORY_MS = 5 * 60 * 1000;
  const TOP_EVERY = 5; /* every 5th request asks for the top keys instead */
  const TIMEOUT_MS = 5000;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  const $ = (id) => document.getElementById(id);
  const fmtInt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const fmt1 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

  const state = {
    token: null,
    prev: null, /* the previous snapshot */
    history: [], /* {t, allowed, denied, p50, p99}; null values are gaps */
    rows: [], /* the per-rule rows with their rates */
    sortKey: 'deniedRate',
    sortDir: -1,
    paused: false,
    timer: null,
    inFlight: false,
    lastStart: -Infinity,
    tick: 0,
    gap: true, /* the next point follows a pause */
    domains: [],
    topAvailable: false,
  };

  /* ------------------------------------------------------------ formatting */

  function rate(v) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    return v < 10 ? fmt1.format(v) : fmtInt.format(v);
  }

  function count(v) {
    return v === null || v === undefined ? '–' : fmtInt.format(v);
  }

  function bytes(v) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i ? fmt1.format(v) : fmtInt.format(v)) + ' ' + units[i];
  }

  function seconds(s) {
    if (s === null || s === undefined) return '–';
    if (s < 0.001) return fmt1.format(s * 1e6) + ' µs';
    if (s < 1) return fmt1.format(s * 1e3) + ' ms';
    return fmt1.format(s) + ' s';
  }

  function latencyText(q) {
    if (!q) return 'no requests';
    return (q.above ? '> ' : '') + seconds(q.value);
  }

  function ago(ms, nowMs) {
    const s = Math.max(0, Math.round((nowMs - ms) / 1000));
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.floor(s / 60) + ' min ago';
    if (s < 86400) return fmt1.format(s / 3600) + ' h ago';
    return fmt1.format(s / 86400) + ' days ago';
  }

  function when(ms, nowMs) {
    if (ms === null || ms === undefined) return 'none since start';
    return new Date(ms).toLocaleString() + ' (' + ago(ms, nowMs) + ')';
  }

  /* ------------------------------------------------------------ DOM helpers */

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function badge(text, level) {
    return el('span', { class: 'badge', 'data-level': level }, text);
  }

  function kv(pairs) {
    const dl = el('dl', { class: 'kv' });
    for (const [k, v] of pairs) {
      dl.append(el('dt', {}, k));
      const dd = el('dd');
      if (v instanceof Node) dd.append(v);
      else dd.textContent = v;
      dl.append(dd);
    }
    return dl;
  }

  function setStatus(text) {
    $('conn-status').textContent = text;
  }

  /* ------------------------------------------------------------ requests */

  async function api(path) {
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    try {
      let r;
      try {
        r = await fetch(path, {
          headers: { Authorization: 'Bearer ' + state.token, Accept: 'application/json' },
          cache: 'no-store',
          credentials: 'omit',
          signal: ctl.signal,
        });
      } catch (e) {
        /* only a failed exchange is "unreachable"; a fault of this page's
         * own code goes on to the console */
        throw { unreachable: true, timeout: e && e.name === 'AbortError' };
      }
      let body = null;
      try {
        body = await r.json();
      } catch (e) {
        body = null;
      }
      return { status: r.status, body };
    } finally {
      clearTimeout(t);
    }
  }

  /* The next request in @delay ms, and never sooner than a second after
   * the one before it started. */
  function schedule(delay) {
    clearTimeout(state.timer);
    state.timer = null;
    if (!state.token || state.paused || document.visibilityState === 'hidden') return;
    const wait = Math.max(delay, state.lastStart + POLL_MS - performance.now(), 0);
    state.timer = setTimeout(poll, wait);
  }

  async function poll() {
    state.timer = null;
    if (state.inFlight || !state.token) return;
    state.inFlight = true;
    const started = performance.now();
    state.lastStart = started;
    const top = state.topAvailable && state.tick % TOP_EVERY === TOP_EVERY - 1 &&
      $('top-domain').value;
    state.tick++;
    try {
      if (top) await pollTop($('top-domain').value);
      else await pollStats();
    } catch (e) {
      state.gap = true;
      if (e && e.unreachable) {
        setStatus('Cannot reach weir (' + (e.timeout ? 'no answer in 5 s' :
          'connection failed') + '); trying again.');
        $('service-status').textContent = 'unreachable';
        $('service-status').dataset.level = 'bad';
      } else {
        console.error('dashboard:', e); /* a fault of the page's own: keep polling */
      }
    } finally {
      state.inFlight = false;
    }
    schedule(POLL_MS - (performance.now() - started));
  }

  function refused(r) {
    const why = r.body && r.body.detail ? r.body.detail : 'the token was refused';
    forget('Refused (' + r.status + '): ' + why);
  }

  async function pollStats() {
    const r = await api('/admin/v1/stats');
    if (r.status === 401 || r.status === 403) return refused(r);
    if (r.status !== 200 || !r.body) {
      setStatus('GET /admin/v1/stats answered ' + r.status + '; trying again.');
      return;
    }
    update(r.body);
  }

  async function pollTop(domain) {
    const r = await api('/admin/v1/top?domain=' + encodeURIComponent(domain) + '&n=10');
    if (r.status === 401 || r.status === 403) return refused(r);
    renderTop(domain, r);
  }

  /* ------------------------------------------------------------ the token */

  function connect(token) {
    state.token = token;
    state.prev = null;
    state.history = [];
    state.gap = true;
    state.tick = 0;
    $('login').hidden = true;
    $('panels').hidden = false;
    $('pause').disabled = false;
    $('forget').disabled = false;
    setStatus('Connecting…');
    schedule(0);
  }

  function forget(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = null;
    clearTimeout(state.timer);
    state.timer = null;
    $('panels').hidden = true;
    $('login').hidden = false;
    $('pause').disabled = true;
    $('forget').disabled = true;
    $('service-status').textContent = 'not connected';
    $('service-status').dataset.level = 'unknown';
    $('login-error').textContent = message || '';
    setStatus('Enter the admin token to start.');
    $('token').value = '';
    $('token').focus();
  }

  /* ------------------------------------------------------------ rates */

  /* The q-quantile of the requests counted between two cumulative
   * histograms (Prometheus style: linear within a bucket). */
  function quantile(bounds, cum, q) {
    const total = cum[cum.length - 1];
    if (!(total > 0)) return null;
    const target = q * total;
    for (let k = 0; k < cum.length; k++) {
      if (cum[k] >= target) {
        if (k >= bounds.length) return { value: bounds[bounds.length - 1], above: true };
        const lo = k ? bounds[k - 1] : 0;
        const below = k ? cum[k - 1] : 0;
        const inBucket = cum[k] - below;
        const f = inBucket > 0 ? (target - below) / inBucket : 1;
        return { value: lo + (bounds[k] - lo) * f, above: false };
      }
    }
    return null;
  }

  function bucketDelta(cur, prev) {
    return cur.map((v, i) => Math.max(0, v - (prev ? prev[i] : 0)));
  }

  function rowKey(r) {
    return r.domain + '\u0000' + r.rule;
  }

  function update(s) {
    const prev = state.prev;
    const dt = prev ? (s.time_ms - prev.time_ms) / 1000 : 0;
    const restarted = prev && s.decisions.totals.allowed < prev.decisions.totals.allowed;
    const usable = prev && dt > 0 && !restarted;
    state.prev = s;

    $('version').textContent = 'version ' + s.version + ', ' + s.workers + ' workers';
    const level = { ok: 'ok', degraded: 'warn', no_rules: 'warn', draining: 'warn' }[s.status] || 'bad';
    $('service-status').textContent = s.status.replace('_', ' ');
    $('service-status').dataset.level = level;
    setStatus(usable ? 'Live.' : 'Connected; rates follow from the next update.');
    $('updated').textContent = new Date().toLocaleTimeString();

    /* decisions */
    const t = s.decisions.totals, pt = prev ? prev.decisions.totals : null;
    const r = (k) => (usable ? Math.max(0, t[k] - pt[k]) / dt : null);
    const allowed = r('allowed'), denied = r('denied');
    $('allowed-rate').textContent = rate(allowed);
    $('denied-rate').textContent = rate(denied);
    $('shadow-rate').textContent = rate(r('shadow_would_deny'));
    $('failure-rate').textContent = rate(r('failure_mode'));
    $('allowed-total').textContent = count(t.allowed);
    $('denied-total').textContent = count(t.denied);

    /* latency, all protocols together and each */
    const lat = s.latency, plat = prev ? prev.latency : null;
    const names = Object.keys(lat.protocols);
    const n = lat.bounds_seconds.length + 1;
    let sum = new Array(n).fill(0);
    const tbody = $('latency-table').tBodies[0];
    tbody.replaceChildren();
    for (const p of names) {
      const d = usable ? bucketDelta(lat.protocols[p].buckets, plat.protocols[p].buckets) : null;
      if (d) sum = sum.map((v, i) => v + d[i]);
      const reqs = d ? d[n - 1] : 0;
      if (lat.protocols[p].count === 0) continue;
      const tr = el('tr');
      tr.append(el('th', { scope: 'row' }, p.toUpperCase()),
        el('td', {}, d ? rate(reqs / dt) : '–'),
        el('td', {}, d ? latencyText(quantile(lat.bounds_seconds, d, 0.5)) : '–'),
        el('td', {}, d ? latencyText(quantile(lat.bounds_seconds, d, 0.99)) : '–'));
      tbody.append(tr);
    }
    if (!tbody.rows.length) {
      const tr = el('tr');
      tr.append(el('td', { colspan: '4', class: 'muted' }, 'No requests yet.'));
      tbody.append(tr);
    }
    const p50 = usable ? quantile(lat.bounds_seconds, sum, 0.5) : null;
    const p99 = usable ? quantile(lat.bounds_seconds, sum, 0.99) : null;
    $('p50').textContent = usable ? latencyText(p50) : '–';
    $('p99').textContent = usable ? latencyText(p99) : '–';

    /* history */
    const now = s.time_ms;
    if (usable) {
      if (state.gap && state.history.length)
        state.history.push({ t: now - dt * 1000, allowed: null, denied: null, p50: null, p99: null });
      state.history.push({ t: now, allowed, denied, p50: p50 ? p50.value : null,
        p99: p99 ? p99.value : null });
      state.gap = false;
    }
    while (state.history.length && state.history[0].t < now - HISTORY_MS) state.history.shift();
    drawDecisions(now);
    drawLatency(now);

    renderRows(s, prev, usable ? dt : 0);
    renderStore(s, prev, usable ? dt : 0);
    renderRules(s);
    renderQuotas(s, prev, usable ? dt : 0);
    renderConnections(s);
    renderAdaptive(s);
    renderTopChoice(s);
  }

  /* ------------------------------------------------------------ charts */

  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  /* Lines of @series (keys of the history's points) over the last five
   * minutes ending at @now, into @svg; @label formats the y axis. */
  function draw(svg, now, series, label) {
    const w = Math.max(200, svg.clientWidth || 600), h = Math.max(100, svg.clientHeight || 180);
    const left = 56, right = 8, top = 8, bottom = 20;
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    svg.replaceChildren();
    let max = 0;
    for (const p of state.history) for (const k of series) if (p[k] > max) max = p[k];
    if (max <= 0) max = 1;
    /* the time shown: what the page has seen, from one minute to five */
    const seen = state.history.length ? now - state.history[0].t : 0;
    const span = Math.min(HISTORY_MS, Math.max(60 * 1000, seen));
    const x = (t) => left + (w - left - right) * (1 - (now - t) / span);
    const y = (v) => top + (h - top - bottom) * (1 - v / max);
    for (const f of [0, 0.5, 1]) {
      svg.append(svgEl('line', { class: 'axis', x1: left, x2: w - right, y1: y(max * f), y2: y(max * f) }));
      const tx = svgEl('text', { class: 'label', x: left - 6, y: y(max * f) + 4, 'text-anchor': 'end' });
      tx.textContent = label(max * f);
      svg.append(tx);
    }
    const start = span >= HISTORY_MS ? '5 min ago' : span >= 120000
      ? Math.round(span / 60000) + ' min ago' : Math.round(span / 1000) + ' s ago';
    for (const [t, text] of [[now - span, start], [now, 'now']]) {
      const tx = svgEl('text', { class: 'label', x: x(t), y: h - 4,
        'text-anchor': t === now ? 'end' : 'start' });
      tx.textContent = text;
      svg.append(tx);
    }
    for (const k of series) {
      let d = '';
      let pen = false;
      for (const p of state.history) {
        if (p[k] === null || p[k] === undefined) {
          pen = false;
          continue;
        }
        d += (pen ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(p[k]).toFixed(1);
        pen = true;
      }
      if (d) svg.append(svgEl('path', { class: 'line ' + k, d }));
    }
  }

  function summary(k, fmtv, unit) {
    const pts = state.history.filter((p) => p[k] !== null && p[k] !== undefined);
    if (!pts.length) return k + ': no data yet';
    const peak = Math.max(...pts.map((p) => p[k]));
    return k + ' now ' + fmtv(pts[pts.length - 1][k]) + unit + ', peak ' + fmtv(peak) + unit;
  }

  function drawDecisions(now) {
    draw($('chart-decisions'), now, ['allowed', 'denied'], rate);
    $('cap-decisions').textContent = 'Decisions per second, up to the last 5 minutes: ' +
      summary('allowed', rate, '/s') + '; ' + summary('denied', rate, '/s') + '.';
  }

  function drawLatency(now) {
    draw($('chart-latency'), now, ['p50', 'p99'], seconds);
    $('cap-latency').textContent = 'Latency, up to the last 5 minutes: ' +
      summary('p50', seconds, '') + '; ' + summary('p99', seconds, '') + '.';
  }

  /* ------------------------------------------------------------ panels */

  function renderRows(s, prev, dt) {
    const before = new Map();
    if (prev) for (const r of prev.decisions.rows) before.set(rowKey(r), r);
    state.rows = s.decisions.rows.map((r) => {
      const p = before.get(rowKey(r));
      const d = (k) => (dt > 0 && p ? Math.max(0, r[k] - p[k]) / dt : null);
      const allowedRate = d('allowed'), deniedRate = d('denied');
      const all = (allowedRate || 0) + (deniedRate || 0);
      return {
        domain: r.domain, rule: r.rule, denied: r.denied, allowedRate, deniedRate,
        shadowRate: d('shadow_would_deny'), failureRate: d('failure_mode'),
        deniedShare: deniedRate === null ? null : all > 0 ? (100 * deniedRate) / all : 0,
      };
    });
    $('rows-note').textContent = s.decisions.rows_total > s.decisions.rows.length
      ? 'Showing the ' + s.decisions.rows.length + ' rules with the most denials of ' +
        count(s.decisions.rows_total) + '.'
      : s.decisions.rows_total === 0 ? 'No decisions yet.' : '';
    drawRows();
  }

  function drawRows() {
    const k = state.sortKey, dir = state.sortDir;
    const rows = state.rows.slice().sort((a, b) => {
      const x = a[k], y = b[k];
      if (typeof x === 'string') return dir * x.localeCompare(y);
      return dir * ((x === null ? -1 : x) - (y === null ? -1 : y)) ||
        a.domain.localeCompare(b.domain) || a.rule.localeCompare(b.rule);
    });
    for (const th of document.querySelectorAll('#rules-table th[data-sort]')) {
      if (th.dataset.sort === k) th.setAttribute('aria-sort', dir < 0 ? 'descending' : 'ascending');
      else th.removeAttribute('aria-sort');
    }
    const tbody = $('rules-table').tBodies[0];
    tbody.replaceChildren();
    for (const r of rows) {
      const tr = el('tr');
      tr.append(el('td', {}, r.domain), el('td', {}, r.rule),
        el('td', { class: 'num' }, rate(r.allowedRate)),
        el('td', { class: 'num' }, rate(r.deniedRate)),
        el('td', { class: 'num' }, r.deniedShare === null ? '–' : fmt1.format(r.deniedShare) + ' %'),
        el('td', { class: 'num' }, rate(r.shadowRate)),
        el('td', { class: 'num' }, rate(r.failureRate)),
        el('td', { class: 'num' }, count(r.denied)));
      tbody.append(tr);
    }
  }

  function breakerLevel(b) {
    return b === 'closed' ? 'ok' : b === 'half_open' ? 'warn' : 'bad';
  }

  function renderStore(s, prev, dt) {
    const st = s.store, body = $('store-body');
    body.replaceChildren();
    const badges = el('div', { class: 'badges' });
    badges.append(badge(st.type.replace('_', ' '), 'off'));
    body.append(badges);
    const perSec = (k) => (dt > 0 && prev && prev.store.type === st.type
      ? rate(Math.max(0, st[k] - prev.store[k]) / dt) + '/s' : '–');
    if (st.type === 'memory') {
      badges.append(badge('in this process', 'ok'));
      body.append(kv([
        ['Keys', count(st.keys)],
        ['Memory', bytes(st.bytes) + (st.max_bytes ? ' of ' + bytes(st.max_bytes) : ' (no cap)')],
        ['Evictions', count(st.evictions) + ' (' + perSec('evictions') + ')'],
        ['Expirations', count(st.expirations)],
        ['Circuit breaker', 'not configured (the memory store has none)'],
      ]));
      return;
    }
    if (st.type === 'other') {
      body.append(el('p', { class: 'muted' }, 'This store reports no figures.'));
      return;
    }
    badges.append(badge('breaker ' + st.breaker.replace('_', '-'), breakerLevel(st.breaker)));
    badges.append(badge(st.connections + ' connected', st.connections > 0 ? 'ok' : 'bad'));
    const pairs = [
      ['Calls', perSec('calls')],
      ['Errors', count(st.errors) + ' (' + perSec('errors') + ')'],
      ['Timeouts', count(st.timeouts) + ' (' + perSec('timeouts') + ')'],
      ['Refused by the open breaker', count(st.rejected)],
      ['Breaker opened', count(st.breaker_opened) + ' times'],
      ['Denied from the over-limit cache', count(st.cached)],
    ];
    if (st.type === 'redis_sentinel') {
      pairs.unshift(['Master', st.master || 'none named yet']);
      pairs.push(['Failovers', count(st.failovers)]);
    }
    body.append(kv(pairs));
    if (st.nodes) {
      const list = el('ul', { class: 'badges', 'aria-label': 'Cluster masters and their breakers' });
      for (const nd of st.nodes) {
        const li = el('li');
        li.append(badge(nd.address + ': ' + nd.breaker.replace('_', '-'), breakerLevel(nd.breaker)));
        list.append(li);
      }
      body.append(el('h3', { class: 'muted' }, 'Cluster masters'), list);
    }
  }

  function renderRules(s) {
    const r = s.rules;
    $('reloads-ok').textContent = count(r.reloads_ok);
    $('reloads-failed').textContent = count(r.reloads_failed);
    $('reloads-failed').className = r.reloads_failed ? 'denied-text' : '';
    $('reload-last-ok').textContent = when(r.last_ok_ms, s.time_ms);
    $('reload-last-failed').textContent = when(r.last_failed_ms, s.time_ms);
    const pre = $('reload-error');
    pre.hidden = !r.last_error;
    pre.textContent = r.last_error || '';
    if (r.last_error) pre.setAttribute('aria-label', 'The last failure\'s reason');
  }

  function renderQuotas(s, prev, dt) {
    const q = s.quotas, body = $('quotas-body');
    body.replaceChildren();
    if (!q.configured) {
      body.append(el('p', {}, 'Quota database: not configured (weir runs without --quota-db).'));
    } else {
      const badges = el('div', { class: 'badges' });
      badges.append(badge(q.db, 'off'), badge(q.up ? 'database up' : 'database down', q.up ? 'ok' : 'bad'));
      body.append(badges, kv([
        ['Tenants in force', count(q.tenants)],
        ['Table read', q.age_seconds === null ? 'never yet' : seconds(q.age_seconds) + ' ago'],
        ['Tables put in force', count(q.loads)],
        ['Failed reads', count(q.errors)],
        ['Records skipped', count(q.skipped)],
      ]));
    }
    body.append(tierTable(s.tiers || [], prev ? prev.tiers || [] : [], dt));
  }

  /* Use of the quotas by tier: each tier's tenants' decisions a second
   * and the share denied, from two snapshots. */
  function tierTable(tiers, before, dt) {
    if (!tiers.length)
      return el('p', { class: 'muted' }, 'By tier: no tenant decided yet (tiers come from a ' +
        'rule file\'s tenants: section).');
    const old = new Map(before.map((t) => [t.domain + '\u0000' + t.tier, t]));
    const table = el('table', { id: 'tiers-table' });
    table.append(el('caption', {}, 'Decisions of tenants by tier'));
    const head = el('tr');
    for (const [label, num] of [['Domain', false], ['Tier', false], ['Allowed/s', true],
      ['Denied/s', true], ['Denied share', true], ['Denied in all', true]])
      head.append(el('th', num ? { scope: 'col', class: 'num' } : { scope: 'col' }, label));
    const thead = el('thead');
    thead.append(head);
    const tbody = el('tbody');
    for (const t of tiers) {
      const p = old.get(t.domain + '\u0000' + t.tier);
      const d = (k) => (dt > 0 && p ? Math.max(0, t[k] - p[k]) / dt : null);
      const a = d('allowed'), n = d('denied');
      const share = n === null ? null : a + n > 0 ? (100 * n) / (a + n) : 0;
      const tr = el('tr');
      tr.append(el('td', {}, t.domain), el('th', { scope: 'row' }, t.tier),
        el('td', { class: 'num' }, rate(a)), el('td', { class: 'num' }, rate(n)),
        el('td', { class: 'num' }, share === null ? '–' : fmt1.format(share) + ' %'),
        el('td', { class: 'num' }, count(t.denied)));
      tbody.append(tr);
    }
    table.append(thead, tbody);
    return table;
  }

  /* Each adaptive limit: its controller's numbers, and its limit's last
   * changes as steps against its most. */
  function renderAdaptive(s) {
    const body = $('adaptive-body'), list = s.adaptive || [];
    body.replaceChildren();
    if (!list.length) {
      body.append(el('p', {}, 'None in force (a concurrency limit with an adaptive: block ' +
        'finds its limit from the time its leases are held).'));
      return;
    }
    const table = el('table', { id: 'adaptive-table' });
    table.append(el('caption', { class: 'sr-only' }, 'Adaptive concurrency limits'));
    const head = el('tr');
    for (const [label, num] of [['Domain', false], ['Rule', false], ['Controller', false],
      ['Limit', true], ['Range', true], ['Time in flight', true], ['No load', true],
      ['Samples', true], ['Dropped', true]])
      head.append(el('th', num ? { scope: 'col', class: 'num' } : { scope: 'col' }, label));
    const thead = el('thead');
    thead.append(head);
    const tbody = el('tbody');
    for (const a of list) {
      const tr = el('tr');
      tr.append(el('td', {}, a.domain), el('th', { scope: 'row' }, a.rule),
        el('td', {}, a.controller + (a.probing ? ' (probing)' : '')),
        el('td', { class: 'num' }, count(a.limit)),
        el('td', { class: 'num' }, count(a.min) + '–' + count(a.max)),
        el('td', { class: 'num' }, a.samples ? seconds(a.rtt_ms / 1000) : '–'),
        el('td', { class: 'num' }, a.noload_rtt_ms ? seconds(a.noload_rtt_ms / 1000) : '–'),
        el('td', { class: 'num' }, count(a.samples)), el('td', { class: 'num' }, count(a.dropped)));
      tbody.append(tr);
    }
    table.append(thead, tbody);
    const wrap = el('div', { class: 'scroll' });
    wrap.append(table);
    body.append(wrap);
    for (const a of list) body.append(adaptiveChart(a, s.time_ms));
  }

  /* One limit's history as steps, from its first change kept to now. */
  function adaptiveChart(a, now) {
    const id = 'cap-adaptive-' + a.id;
    const fig = el('figure', { class: 'chart small' });
    const svg = svgEl('svg', { role: 'img', 'aria-labelledby': id, focusable: 'false',
      class: 'adaptive-chart' });
    const cap = el('figcaption', { id, class: 'muted' },
      a.domain + ' ' + a.rule + ': limit ' + a.limit + ' of ' + a.max + '; ' +
      (a.history.length ? a.history.length + (a.history.length > 1 ? ' changes' : ' change') +
        ' kept.' : 'no change yet.'));
    fig.append(svg, cap);
    const w = 600, h = 120, left = 56, right = 8, top = 8, bottom = 20;
    svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
    const pts = a.history.length ? a.history : [[now, a.limit]];
    const t0 = Math.min(pts[0][0], now - 1000), span = Math.max(1, now - t0);
    const x = (t) => left + (w - left - right) * ((t - t0) / span);
    const y = (v) => top + (h - top - bottom) * (1 - v / a.max);
    for (const v of [0, a.max]) {
      svg.append(svgEl('line', { class: 'axis', x1: left, x2: w - right, y1: y(v), y2: y(v) }));
      const tx = svgEl('text', { class: 'label', x: left - 6, y: y(v) + 4, 'text-anchor': 'end' });
      tx.textContent = count(v);
      svg.append(tx);
    }
    let d = 'M' + x(pts[0][0]).toFixed(1) + ' ' + y(pts[0][1]).toFixed(1);
    for (let i = 1; i < pts.length; i++)
      d += 'H' + x(pts[i][0]).toFixed(1) + 'V' + y(pts[i][1]).toFixed(1);
    d += 'H' + x(now).toFixed(1);
    svg.append(svgEl('path', { class: 'line allowed', d }));
    return fig;
  }

  function renderConnections(s) {
    const tbody = $('conn-table').tBodies[0];
    tbody.replaceChildren();
    for (const p of Object.keys(s.connections)) {
      const c = s.connections[p];
      const tr = el('tr');
      tr.append(el('th', { scope: 'row' }, p.toUpperCase()), el('td', { class: 'num' }, count(c.open)),
        el('td', { class: 'num' }, count(c.accepted)), el('td', { class: 'num' }, count(c.rejected)),
        el('td', { class: 'num' }, count(c.evicted)));
      tbody.append(tr);
    }
  }

  /* The domains of the top keys' choice, from the rows; the route's
   * presence from "routes". */
  function renderTopChoice(s) {
    state.topAvailable = (s.routes || []).indexOf('/admin/v1/top') >= 0;
    const domains = [...new Set(s.decisions.rows.map((r) => r.domain))].sort();
    const sel = $('top-domain');
    if (domains.join('\u0000') !== state.domains.join('\u0000')) {
      const keep = sel.value;
      sel.replaceChildren();
      for (const d of domains) sel.append(el('option', { value: d }, d));
      if (domains.indexOf(keep) >= 0) sel.value = keep;
      state.domains = domains;
    }
    sel.disabled = !state.topAvailable || !domains.length;
    if (!state.topAvailable) {
      $('top-body').replaceChildren(el('p', {},
        'Not available in this build: it has no /admin/v1/top route.'));
    } else if (!domains.length) {
      $('top-body').replaceChildren(el('p', { class: 'muted' }, 'No decisions yet.'));
    }
  }

  function renderTop(domain, r) {
    const body = $('top-body');
    if (r.status === 404 && r.body && /^no such path/.test(r.body.detail || '')) {
      state.topAvailable = false;
      body.replaceChildren(el('p', {}, 'Not available in this build: it has no /admin/v1/top route.'));
      return;
    }
    if (r.status !== 200 || !r.body) {
      body.replaceChildren(el('p', { class: 'error' },
        'GET /admin/v1/top answered ' + r.status + (r.body && r.body.detail ? ': ' + r.body.detail : '')));
      return;
    }
    const keys = r.body.keys || [];
    const table = el('table');
    table.append(el('caption', {}, 'Keys of ' + domain + ' denied most over the last ' +
      count(r.body.window_seconds) + ' s (updated ' + new Date().toLocaleTimeString() + ')'));
    const head = el('tr');
    head.append(el('th', { scope: 'col' }, '#'), el('th', { scope: 'col' }, 'Key'),
      el('th', { scope: 'col', class: 'num' }, 'Denied'), el('th', { scope: 'col', class: 'num' }, '± error'));
    const thead = el('thead');
    thead.append(head);
    table.append(thead);
    const tbody = el('tbody');
    keys.forEach((k, i) => {
      const tr = el('tr');
      const text = (k.entries || []).map((e) => e.key + '=' + e.value).join(', ');
      tr.append(el('td', {}, String(i + 1)), el('td', { class: 'key-text' }, text),
        el('td', { class: 'num' }, count(k.denied)),
        el('td', { class: 'num' }, k.error === undefined ? '–' : count(k.error)));
      tbody.append(tr);
    });
    if (!keys.length) {
      const tr = el('tr');
      tr.append(el('td', { colspan: '4', class: 'muted' }, 'No key was denied in the window.'));
      tbody.append(tr);
    }
    table.append(tbody);
    const wrap = el('div', { class: 'scroll' });
    wrap.append(table);
    body.replaceChildren(wrap);
  }

  /* ------------------------------------------------------------ wiring */

  function start() {
    $('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const token = $('token').value.trim();
      if (!token) return;
      $('login-error').textContent = '';
      sessionStorage.setItem(TOKEN_KEY, token);
      $('token').value = '';
      connect(token);
    });
    $('forget').addEventListener('click', () => forget('The token is forgotten.'));
    $('pause').addEventListener('click', () => {
      state.paused = !state.paused;
      $('pause').setAttribute('aria-pressed', String(state.paused));
      $('pause').textContent = state.paused ? 'Resume updates' : 'Pause updates';
      if (state.paused) {
        state.gap = true;
        setStatus('Paused.');
      }
      schedule(0);
    });
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'hidden') state.gap = true;
      schedule(0);
    });
    for (const th of document.querySelectorAll('#rules-table th[data-sort]')) {
      th.querySelector('button').addEventListener('click', () => {
        const k = th.dataset.sort;
        if (state.sortKey === k) state.sortDir = -state.sortDir;
        else {
          state.sortKey = k;
          state.sortDir = k === 'domain' || k === 'rule' ? 1 : -1;
        }
        drawRows();
      });
    }
    $('top-domain').addEventListener('change', () => {
      $('top-body').replaceChildren(el('p', { class: 'muted' }, 'Asking…'));
    });
    window.addEventListener('resize', () => {
      if (state.prev) {
        drawDecisions(state.prev.time_ms);
        drawLatency(state.prev.time_ms);
      }
    });
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved) connect(saved);
    else $('token').focus();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
