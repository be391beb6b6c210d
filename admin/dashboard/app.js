// The Spillway dashboard: polls /dashboard/data once a second (all of the
// last 15 minutes first, then the points after the last one it has) and
// draws each route's and cluster's series as SVG line charts.
"use strict";
(() => {
  const KEEP = 900; // points: 15 minutes at 1 s, as the gateway keeps
  const W = 300, H = 64;
  const COLORS = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#c62828", "#00838f", "#5d4037", "#9e9d24"];
  const SVG = "http://www.w3.org/2000/svg";
  const ROUTE_CHARTS = [
    { title: "requests/s", cols: [["offered", "offered"], ["admitted", "admitted"], ["goodput", "goodput"]] },
    { title: "latency ms", cols: [["p50_ms", "p50"], ["p99_ms", "p99"]] },
    { title: "rejects/s", rejects: true, cols: [] },
    { title: "retries", cols: [["retries", "retries/s"], ["retry_budget", "budget tokens"]] },
  ];
  const CLUSTER_CHARTS = [
    { title: "limit vs in flight", cols: [["limit", "limit"], ["in_flight", "in flight"]] },
    { title: "queue length", cols: [["queue_length", "waiting"]] },
    { title: "queue wait ms", cols: [["queue_wait_ms", "wait"]] },
    { title: "brownout, breaker", cols: [["brownout", "brownout level"], ["breaker", "breaker (1 open)"]] },
  ];
  const st = { since: 0, t: [], routes: new Map(), clusters: new Map(), metrics: true };
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // entity returns the stored columns of a route or cluster, made on first sight.
  function entity(map, name, kind, specs) {
    let e = map.get(name);
    if (!e) {
      e = { name, kind, cols: new Map(), rejects: new Map(), endpoints: new Map(), specs, panel: null };
      map.set(name, e);
    }
    return e;
  }

  function pad(arr, n) { while (arr.length < n) arr.push(null); return arr; }

  function push(cols, key, values, before) {
    const arr = pad(cols.get(key) || [], before);
    for (const v of values) arr.push(v);
    cols.set(key, arr);
  }

  function merge(d) {
    const before = st.t.length;
    st.metrics = d.metrics;
    st.untracked = d.untracked;
    for (const t of d.t) st.t.push(t);
    for (const r of d.routes) {
      const e = entity(st.routes, r.name, "route", ROUTE_CHARTS);
      e.cluster = r.cluster;
      for (const spec of ROUTE_CHARTS) for (const [k] of spec.cols) push(e.cols, k, r[k], before);
      for (const [k, v] of Object.entries(r.rejects)) push(e.rejects, k, v, before);
    }
    for (const c of d.clusters) {
      const e = entity(st.clusters, c.name, "cluster", CLUSTER_CHARTS);
      for (const spec of CLUSTER_CHARTS) for (const [k] of spec.cols) push(e.cols, k, c[k], before);
      if (d.t.length > 0) {
        e.endpoints = new Map(c.endpoints.map((ep) => [ep.address, ep.state || "absent"]));
      }
    }
    const n = st.t.length, drop = Math.max(0, n - KEEP);
    for (const map of [st.routes, st.clusters]) {
      for (const e of map.values()) {
        for (const cols of [e.cols, e.rejects]) {
          for (const [k, arr] of cols) cols.set(k, pad(arr, n).slice(drop));
        }
      }
    }
    st.t = st.t.slice(drop);
    if (d.now > 0) st.since = d.now;
  }

  function makePanel(e) {
    const p = el("section", "panel");
    p.dataset.kind = e.kind;
    p.dataset.name = e.name;
    const h = el("h2");
    h.append(el("span", "kind", e.kind + " "), document.createTextNode(e.name));
    if (e.kind === "route" && e.cluster) h.append(el("span", "kind", " → " + e.cluster));
    p.append(h);
    if (e.kind === "cluster") { e.chipBox = el("div", "chips"); p.append(e.chipBox); }
    const charts = el("div", "charts");
    e.charts = e.specs.map((spec) => {
      const c = el("div", "chart");
      const title = el("div", "title");
      const name = el("span", "", spec.title), value = el("span");
      title.append(name, value);
      const svg = document.createElementNS(SVG, "svg");
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      svg.setAttribute("preserveAspectRatio", "none");
      const keys = el("div", "keys");
      c.append(title, svg, keys);
      charts.append(c);
      return { spec, svg, value, keys, paths: new Map() };
    });
    p.append(charts);
    e.panel = p;
    return p;
  }

  // columns lists a chart's [key, label, values].
  function columns(e, chart) {
    if (chart.spec.rejects) return [...e.rejects].map(([k, v]) => [k, k, v]);
    return chart.spec.cols.map(([k, label]) => [k, label, e.cols.get(k) || []]);
  }

  function drawChart(e, chart, t0, t1) {
    const cols = columns(e, chart);
    let max = 0, drawn = 0;
    for (const [, , vs] of cols) for (const v of vs) if (v !== null && v > max) max = v;
    const top = max;
    max = max > 0 ? max * 1.1 : 1;
    const span = Math.max(1, t1 - t0);
    cols.forEach(([key, label, vs], i) => {
      let p = chart.paths.get(key);
      if (!p) {
        p = document.createElementNS(SVG, "path");
        p.setAttribute("stroke", COLORS[i % COLORS.length]);
        chart.svg.append(p);
        const k = el("span", "", label);
        k.style.setProperty("--c", COLORS[i % COLORS.length]);
        chart.keys.append(k);
        chart.paths.set(key, p);
      }
      let d = "", gap = true, n = 0;
      vs.forEach((v, j) => {
        if (v === null) { gap = true; return; }
        const x = ((st.t[j] - t0) / span) * W, y = H - 2 - (v / max) * (H - 4);
        d += (gap ? "M" : "L") + x.toFixed(1) + " " + y.toFixed(1);
        gap = false;
        n++;
      });
      p.setAttribute("d", d);
      p.dataset.points = n;
      drawn += n;
    });
    const first = cols.length ? cols[0][2] : [];
    const last = first.length ? first[first.length - 1] : null;
    chart.value.textContent = drawn === 0 ? "no data" : (last === null ? "–" : fmt(last)) + " · max " + fmt(top);
    return drawn;
  }

  function fmt(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }

  function drawChips(e) {
    const box = e.chipBox;
    box.replaceChildren();
    for (const [addr, state] of e.endpoints) {
      const c = el("span", "chip state-" + state, addr);
      c.title = addr + ": " + state;
      c.dataset.endpoint = addr;
      c.dataset.state = state;
      box.append(c);
    }
    if (e.endpoints.size === 0) box.append(el("span", "note", "no endpoints"));
  }

  // order puts each cluster's panel before its routes' panels.
  function order() {
    const out = [];
    for (const c of st.clusters.values()) {
      out.push(c);
      for (const r of st.routes.values()) if (r.cluster === c.name) out.push(r);
    }
    for (const r of st.routes.values()) if (!st.clusters.has(r.cluster)) out.push(r);
    return out;
  }

  function render() {
    const box = $("panels");
    const t1 = st.t.length ? st.t[st.t.length - 1] : 0, t0 = st.t.length ? st.t[0] : 0;
    let points = 0;
    const list = order();
    list.forEach((e, i) => {
      if (!e.panel) makePanel(e);
      if (box.children[i] !== e.panel) box.insertBefore(e.panel, box.children[i] || null);
      if (e.chipBox) drawChips(e);
      for (const c of e.charts) points += drawChart(e, c, t0, t1);
    });
    document.body.dataset.samples = st.t.length;
    document.body.dataset.points = points;
    const when = t1 ? new Date(t1).toLocaleTimeString() : "no sample yet";
    let s = `${when} · ${st.t.length} s kept`;
    if (!st.metrics) s += " · metrics off: no request series";
    const u = st.untracked || {};
    if (u.routes || u.clusters || u.endpoints) s += ` · not tracked: ${u.routes} routes, ${u.clusters} clusters, ${u.endpoints} endpoints`;
    $("status").textContent = s;
  }

  async function poll() {
    try {
      const r = await fetch("/dashboard/data?since=" + st.since, { credentials: "same-origin", cache: "no-store" });
      if (r.status === 401) { $("login").hidden = false; $("status").textContent = "the admin token is needed"; return; }
      if (!r.ok) throw new Error("HTTP " + r.status);
      merge(await r.json());
      render();
    } catch (err) {
      $("status").textContent = "no answer from the gateway: " + err.message;
    }
    setTimeout(poll, 1000);
  }

  async function login(ev) {
    ev.preventDefault();
    const form = $("login");
    const r = await fetch("/dashboard/login", { method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin" });
    if (r.status !== 204) { $("login-error").textContent = "refused (" + r.status + ")"; return; }
    form.hidden = true;
    form.reset();
    poll();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", login);
    poll();
  });
})();
