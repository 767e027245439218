// Dashboard: polls the owner results endpoint every second and redraws the table and charts.
// The owner token comes from the URL fragment (#token=...) or the form; it is sent only as a
// Bearer header. The fragment is cleared from the address bar and the history at once (the token
// stays in this tab's sessionStorage, so a reload still works). All item text is inserted with
// textContent.
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("config").textContent);
  const eid = cfg.experiment_id;
  // every learner class's kind, paper and parameter defaults (rendered by the server, public facts)
  const META = JSON.parse(document.getElementById("learners-meta").textContent);
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = "pb.token." + eid;
  // the fragment's owner token, else one given here before, else the admin token of /admin in this tab
  const fromUrl = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromUrl !== null) {
    if (fromUrl) sessionStorage.setItem(TOKEN_KEY, fromUrl);
    // out of the address bar and the history: not shown on screen, not kept in the browser's history
    history.replaceState(null, "", location.pathname + location.search);
  }
  let token = fromUrl || sessionStorage.getItem(TOKEN_KEY) || sessionStorage.getItem("purebandits.admin_token");
  let timer = null;
  // several learners side by side: `learners` lists their labels, `learner` is the one shown
  let learners = [], learner = null, seq = 0;
  let info = null;  // GET /api/experiments/{eid}: the learners' settings, fetched once per accepted token

  function auth() { return {Authorization: "Bearer " + token}; }

  // the widgets and the control buttons are shown only while the token is accepted
  function showDashboard(on) {
    $("dash-body").hidden = !on;
    $("controls").hidden = !on;
    if (on) $("token-form").hidden = true;
  }

  function askToken(msg) {
    clearTimeout(timer);
    seq++;  // answers of polls still running are dropped
    info = null;
    showDashboard(false);
    $("token-form").hidden = false;
    $("error").textContent = msg || "";
  }

  function rejected() {
    if (sessionStorage.getItem(TOKEN_KEY) === token) sessionStorage.removeItem(TOKEN_KEY);  // not kept if wrong
    askToken("Invalid owner token.");
  }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token-input").value.trim();
    $("token-input").value = "";
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token-form").hidden = true;
    poll();
  });

  // a request the network lost: say so instead of failing silently (nothing was changed or downloaded);
  // in its own line, which the polling (that rewrites #error every second) leaves alone
  const actionError = document.createElement("p");
  actionError.id = "action-error";
  actionError.className = $("error").className;
  $("error").after(actionError);
  async function send(url, opts, what) {
    try {
      const r = await fetch(url, opts);
      actionError.textContent = "";
      return r;
    } catch (e) {
      actionError.textContent = `Could not reach the server: ${what} was not done. Try again when the connection is back.`;
      return null;
    }
  }

  async function control(action) {
    const r = await send(`/api/experiments/${eid}/${action}`, {method: "POST", headers: auth()}, action);
    if (r === null) return;
    if (r.status === 401) { rejected(); return; }
    if (!r.ok) { const d = await r.json().catch(() => ({})); $("error").textContent = d.detail || r.statusText; }
    poll();
  }
  ["pause", "resume", "stop"].forEach((a) => $(a).addEventListener("click", () => {
    if (a !== "stop" || confirm("Stop the experiment for good?")) control(a);
  }));

  async function download(path, name) {
    const r = await send(`/api/experiments/${eid}/${path}`, {headers: auth()}, "the export");
    if (r === null) return;
    if (!r.ok) { $("error").textContent = "export failed: " + r.status; return; }
    const url = URL.createObjectURL(await r.blob());
    const a = document.createElement("a");
    a.href = url; a.download = name; document.body.appendChild(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  $("export-answers").addEventListener("click", () => download("answers.csv", `experiment-${eid}-answers.csv`));
  function downloadSummary(label) {
    if (!label) return download("summary.csv", `experiment-${eid}-summary.csv`);
    return download(`summary.csv?algorithm=${encodeURIComponent(label)}`, `${eid}_summary_${label}.csv`);
  }
  // the header's button: the learner shown (the only one, or the selected tab)
  $("export-summary").addEventListener("click", () => downloadSummary(learner || learners[0] || null));

  function fmt(x, d) { return x === null || x === undefined ? "–" : Number(x).toFixed(d === undefined ? 3 : d); }

  let rmin = 0, rmax = 1;  // reward range of the label set, the x axis of the interval plots

  function ciSvg(row) {
    const ns = "http://www.w3.org/2000/svg";
    const w = 140, h = 14, sx = (v) => 4 + (w - 8) * Math.min(1, Math.max(0, (v - rmin) / (rmax - rmin || 1)));
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "ci"); svg.setAttribute("width", w); svg.setAttribute("height", h);
    const axis = document.createElementNS(ns, "line");
    axis.setAttribute("x1", 4); axis.setAttribute("x2", w - 4); axis.setAttribute("y1", h / 2); axis.setAttribute("y2", h / 2);
    axis.setAttribute("stroke", "#e4e7ec"); svg.appendChild(axis);
    if (row.mean !== null) {
      const lo = row.lower === null ? rmin : row.lower, hi = row.upper === null ? rmax : row.upper;
      const bar = document.createElementNS(ns, "line");
      bar.setAttribute("x1", sx(lo)); bar.setAttribute("x2", sx(hi)); bar.setAttribute("y1", h / 2); bar.setAttribute("y2", h / 2);
      bar.setAttribute("stroke", row.recommended ? "#2458d6" : "#98a2b3"); bar.setAttribute("stroke-width", 4);
      svg.appendChild(bar);
      const dot = document.createElementNS(ns, "circle");
      dot.setAttribute("cx", sx(row.mean)); dot.setAttribute("cy", h / 2); dot.setAttribute("r", 3.5); dot.setAttribute("fill", "#1d2430");
      svg.appendChild(dot);
    }
    return svg;
  }

  // ---- readable numbers of the intervals: clipped to the reward range, a clipped end marked
  // (a lower bound below the range shows as "≤ min", an upper bound above it as "≥ max"), null as "–"
  function clipEnd(v, lowerEnd) {
    if (v === null || v === undefined) return {text: "–", clipped: false, value: null};
    const c = Math.min(rmax, Math.max(rmin, v));
    const clipped = lowerEnd ? v < rmin : v > rmax;
    return {text: (clipped ? (lowerEnd ? "≤ " : "≥ ") : "") + fmt(c, 2), clipped, value: c};
  }

  function intervalCell(row) {
    const box = document.createElement("div");
    box.className = "ci-box";
    box.appendChild(ciSvg(row));
    const lo = clipEnd(row.lower, true), hi = clipEnd(row.upper, false);
    const txt = document.createElement("span");
    txt.className = "ci-text";
    txt.textContent = `[${lo.text}, ${hi.text}]`;
    box.appendChild(txt);
    let title = `interval [${lo.value === null ? "–" : fmt(lo.value, 3)}, ${hi.value === null ? "–" : fmt(hi.value, 3)}]`;
    if (row.mean !== null) title = `mean ${fmt(Math.min(rmax, Math.max(rmin, row.mean)), 3)}, ` + title;
    const notes = [];
    if (lo.clipped) notes.push(`the lower bound is below ${fmt(rmin, 2)}`);
    if (hi.clipped) notes.push(`the upper bound is above ${fmt(rmax, 2)}`);
    if (row.lower === null || row.upper === null) notes.push("– : no bound yet");
    title += ` (reward range ${fmt(rmin, 2)} to ${fmt(rmax, 2)}` + (notes.length ? "; " + notes.join("; ") : "") + ")";
    return [box, title];
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    if (text instanceof Node) td.appendChild(text); else td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function drawTable(res) {
    const tbody = $("ranking").querySelector("tbody");
    tbody.textContent = "";
    res.ranking.slice(0, 30).forEach((row) => {
      const tr = document.createElement("tr");
      if (row.recommended) tr.className = "rec";
      tr.dataset.arm = row.arm;
      cell(tr, String(row.rank), "rank");
      cell(tr, row.text, "text");
      cell(tr, fmt(row.mean), "mean");
      const [box, title] = intervalCell(row);
      cell(tr, box, "interval").title = title;
      cell(tr, String(row.count) + (row.pending ? ` (+${row.pending})` : ""), "count");
      cell(tr, Object.entries(row.labels).map(([k, v]) => `${k}: ${v}`).join(", "), "labels muted");
      // the column names, for the one-card-per-item layout of narrow screens
      ["#", "item", "mean", "interval", "answers", "labels"].forEach((h, i) => { tr.children[i].dataset.label = h; });
      tbody.appendChild(tr);
    });
  }

  function canvasCtx(id) {
    const c = $(id), ctx = c.getContext("2d");
    ctx.clearRect(0, 0, c.width, c.height);
    ctx.font = "11px system-ui, sans-serif";
    return [c, ctx];
  }

  function drawAllocation(res) {
    const [c, ctx] = canvasCtx("allocation");
    const counts = res.ranking.map((r) => r.count);
    const max = Math.max(1, ...counts), pad = 24, w = (c.width - pad - 4) / Math.max(1, counts.length);
    ctx.fillStyle = "#667085"; ctx.fillText(String(max), 2, 12); ctx.fillText("0", 2, c.height - 4);
    counts.forEach((n, i) => {
      const h = (c.height - 20) * n / max;
      ctx.fillStyle = res.ranking[i].recommended ? "#2458d6" : "#98a2b3";
      ctx.fillRect(pad + i * w, c.height - 4 - h, Math.max(1, w - (w > 3 ? 1 : 0)), h);
    });
  }

  function drawTimeline(res) {
    const [c, ctx] = canvasCtx("timeline");
    const b = (res.timeline && res.timeline.buckets) || [];
    if (!b.length) { ctx.fillStyle = "#667085"; ctx.fillText("no answers yet", 10, 20); return; }
    let cum = 0;
    const pts = b.map(([t, n]) => [t, (cum += n)]);
    const t0 = pts[0][0], t1 = Math.max(res.now, pts[pts.length - 1][0] + 1), max = Math.max(1, cum), pad = 30;
    const x = (t) => pad + (c.width - pad - 6) * (t - t0) / (t1 - t0), y = (v) => c.height - 14 - (c.height - 24) * v / max;
    ctx.fillStyle = "#667085"; ctx.fillText(String(max), 2, 12); ctx.fillText("0", 2, c.height - 14);
    ctx.fillText(new Date(t0 * 1000).toLocaleTimeString(), pad, c.height - 2);
    ctx.strokeStyle = "#2458d6"; ctx.lineWidth = 2; ctx.beginPath(); ctx.moveTo(x(t0), y(0));
    pts.forEach(([t, v]) => ctx.lineTo(x(t + res.timeline.bucket_seconds), y(v)));
    ctx.lineTo(x(t1), y(cum)); ctx.stroke();
  }

  // ---- several learners: tabs choose whose results are shown; the comparison table lists all of them
  function drawTabs() {
    const box = $("learner-tabs"), multi = learners.length > 1;
    box.hidden = !multi; $("learner-heading").hidden = !multi; $("comparison").hidden = !multi;
    $("export-summary").textContent = multi ? `Summary CSV (${learner})` : "Summary CSV";
    if (!multi) { box.textContent = ""; return; }
    if (box.dataset.labels !== JSON.stringify(learners)) {
      box.textContent = "";
      learners.forEach((label) => {
        const b = document.createElement("button");
        b.type = "button"; b.className = "tab"; b.dataset.label = label; b.textContent = label;
        b.setAttribute("role", "tab");
        b.addEventListener("click", () => { if (label !== learner) { learner = label; drawTabs(); poll(); } });
        box.appendChild(b);
      });
      box.dataset.labels = JSON.stringify(learners);
    }
    box.querySelectorAll("button").forEach((b) => b.setAttribute("aria-selected", String(b.dataset.label === learner)));
  }

  function drawComparison(cmp) {
    const tbody = $("comparison-table").querySelector("tbody");
    tbody.textContent = "";
    const total = cmp.algorithms.reduce((s, a) => s + (a.share || 0), 0) || 1;
    cmp.algorithms.forEach((a) => {
      const tr = document.createElement("tr");
      tr.dataset.label = a.label;
      if (a.label === learner) tr.className = "selected";
      const name = document.createElement("span");
      const b = document.createElement("b"); b.textContent = a.label;
      const alg = document.createElement("span"); alg.className = "muted";
      alg.textContent = ` ${a.algorithm}`;
      name.append(b, alg);
      const stop = a.stopped_at_answers === null || a.stopped_at_answers === undefined ? "?" : a.stopped_at_answers;
      const btn = document.createElement("button");
      btn.type = "button"; btn.className = "export-summary-learner"; btn.dataset.label = a.label;
      btn.textContent = "Summary CSV";
      btn.addEventListener("click", () => downloadSummary(a.label));
      cell(tr, name, "learner");
      cell(tr, `${Math.round(100 * a.share / total)}%`);
      cell(tr, String(a.n_answers), "n-answers");
      cell(tr, String(a.n_participants));
      cell(tr, a.done ? `done: stopped at ${stop} answers` : "running", a.done ? "state done" : "state");
      cell(tr, a.recommendation.map((r) => r.text).join(" | "), "text");
      cell(tr, btn, "export");
      // the column names, for the one-card-per-learner layout of narrow screens
      ["learner", "share", "answers", "participants", "state", "recommendation", ""].forEach((h, i) => {
        tr.children[i].dataset.label = h;
      });
      tbody.appendChild(tr);
    });
    $("agreement").textContent = (cmp.agreement || []).length
      ? `Agreement of the recommended top-${cmp.k} sets: ` + cmp.agreement.map((g) =>
        `${g.a} vs ${g.b}: ${g.overlap} of ${cmp.k} in common (Jaccard ${fmt(g.jaccard, 2)})`).join(" · ")
      : "";
  }

  async function pollComparison(mine) {
    const r = await fetch(`/api/experiments/${eid}/comparison`, {headers: auth()});
    if (r.ok && mine === seq) drawComparison(await r.json());
  }

  function render(res) {
    const rewards = res.labels.map((l) => l.reward);
    rmin = Math.min(...rewards); rmax = Math.max(...rewards);
    $("title").textContent = res.name;
    $("status").textContent = res.done ? `${res.status} (learner done)` : res.status;
    $("n-answers").textContent = String(res.n_answers);
    $("n-pending").textContent = String(res.n_pending);
    $("n-items").textContent = String(res.n_items);
    $("algorithm").textContent = `${learners.length > 1 ? res.algorithm_label + " · " : ""}${res.algorithm}`;
    $("recommendation").textContent = res.recommendation.map((r) => r.text).join(" | ");
    const s = res.stopping;
    $("progress-bar").style.width = `${Math.round(100 * s.fraction)}%`;
    let text = s.done ? "stopped: the learner's stopping rule fired" :
      (s.budget ? `${s.n_pulls} of ${s.budget} answers (budget)` :
       `${s.separated} of ${res.n_items - res.recommendation.length} other items separated from the recommendation by the intervals`);
    $("progress-text").textContent = `${Math.round(100 * s.fraction)}% — ${text}`;
    $("label-totals").textContent = Object.entries(res.label_totals).map(([k, v]) => `${k}: ${v}`).join(" · ");
    drawTable(res); drawAllocation(res); drawTimeline(res);
    document.body.dataset.version = String(res.version);
  }

  // ---- the learners' settings in words: label, algorithm, paper, one "name = value" line per parameter,
  // and the stopping rule of its kind
  function valueText(v) {
    if (v === null || v === undefined) return "default";
    return typeof v === "string" ? v : JSON.stringify(v);
  }

  function stoppingRule(kind, params, defaults, k) {
    const get = (name) => (name in params ? params[name] : defaults[name]);
    if (kind === "fixed_confidence") {
      return `Stops when its confidence bounds separate the top ${k} at error probability ` +
        `delta = ${valueText(get("delta"))}.`;
    }
    if (kind === "fixed_budget") return `Stops after budget = ${valueText(get("budget"))} answers.`;
    if (kind === "anytime") return "Never stops by itself; the owner stops it.";
    return `Stopping rule: ${kind}.`;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function renderSettings(inf) {
    const box = $("learner-settings");
    box.textContent = "";
    const specs = inf.algorithms && inf.algorithms.length ? inf.algorithms
      : [{label: inf.algorithm, algorithm: inf.algorithm, params: inf.params || {}, share: 1}];
    const total = specs.reduce((s, a) => s + (a.share || 0), 0) || 1;
    specs.forEach((a) => {
      const m = META[a.algorithm] || {kind: "", paper: "", defaults: {}};
      const params = a.params || {};
      const card = el("article", "learner-card");
      card.dataset.label = a.label;
      const head = el("h3", "");
      head.appendChild(el("span", "learner-name", a.label));
      if (specs.length > 1) head.appendChild(el("span", "muted share", ` ${Math.round(100 * (a.share || 0) / total)}% of the participants`));
      card.appendChild(head);
      const dl = el("dl", "");
      const row = (dt, dd) => { dl.appendChild(el("dt", "", dt)); dl.appendChild(dd); };
      const alg = el("dd", ""); alg.appendChild(el("code", "", a.algorithm));
      if (m.kind) alg.appendChild(el("span", "muted", ` (${m.kind.replace(/_/g, " ")})`));
      row("algorithm", alg);
      if (m.paper) row("paper", el("dd", "paper", m.paper));
      const list = el("dd", "");
      const names = Object.keys(params);
      if (names.length) {
        const ul = el("ul", "params");
        names.forEach((n) => ul.appendChild(el("li", "", `${n} = ${valueText(params[n])}`)));
        list.appendChild(ul);
      }
      list.appendChild(el("span", "muted", names.length ? "others at their defaults" : "all at their defaults"));
      row("parameters", list);
      const k = "k" in params ? params.k : inf.k;
      row("stopping", el("dd", "stopping", stoppingRule(m.kind, params, m.defaults || {}, k)));
      card.appendChild(dl);
      box.appendChild(card);
    });
  }

  async function loadInfo(mine) {
    try {
      const r = await fetch(`/api/experiments/${eid}`, {headers: auth()});
      if (mine !== seq) return;
      if (r.status === 401) { rejected(); return; }
      if (r.ok) { info = await r.json(); renderSettings(info); }
    } catch (e) { /* shown again by the next poll */ }
  }

  async function poll() {
    clearTimeout(timer);
    if (!token) { askToken("Enter the owner token to open this dashboard."); return; }
    const mine = ++seq;  // a tab switch starts a new poll: older answers are dropped
    try {
      // at most 2,000 ranking rows per poll: a contest with thousands of items is not sent whole every second
      const q = `?limit=2000` + (learner ? `&algorithm=${encodeURIComponent(learner)}` : "");
      const r = await fetch(`/api/experiments/${eid}/results${q}`, {headers: auth()});
      if (mine !== seq) return;
      if (r.status === 401) { rejected(); return; }
      if (!r.ok) { $("error").textContent = `results: ${r.status}`; }
      else {
        const res = await r.json();
        if (mine !== seq) return;
        $("error").textContent = "";
        showDashboard(true);
        if (!info) await loadInfo(mine);
        if (mine !== seq) return;
        learners = res.algorithms || [];
        if (learners.length > 1 && !learner) learner = res.algorithm_label;
        drawTabs();
        render(res);
        if (learners.length > 1) await pollComparison(mine);
      }
    } catch (e) { $("error").textContent = "connection lost, retrying…"; }
    if (mine !== seq) return;
    timer = setTimeout(poll, 1000);
  }
  poll();
})();
