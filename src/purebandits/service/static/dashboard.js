// Dashboard: polls the owner results endpoint every second and redraws the table and charts.
// The owner token comes from the URL fragment (#token=...) or the form; it is sent only as a
// Bearer header. All item text is inserted with textContent.
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("config").textContent);
  const eid = cfg.experiment_id;
  const $ = (id) => document.getElementById(id);
  let token = new URLSearchParams(location.hash.slice(1)).get("token") || sessionStorage.getItem("pb.token." + eid);
  let timer = null;

  function auth() { return {Authorization: "Bearer " + token}; }

  function askToken(msg) {
    $("token-form").hidden = false;
    $("error").textContent = msg || "";
  }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token-input").value.trim();
    sessionStorage.setItem("pb.token." + eid, token);
    $("token-form").hidden = true;
    poll();
  });

  async function control(action) {
    const r = await fetch(`/api/experiments/${eid}/${action}`, {method: "POST", headers: auth()});
    if (!r.ok) { const d = await r.json().catch(() => ({})); $("error").textContent = d.detail || r.statusText; }
    poll();
  }
  ["pause", "resume", "stop"].forEach((a) => $(a).addEventListener("click", () => {
    if (a !== "stop" || confirm("Stop the experiment for good?")) control(a);
  }));

  async function download(path, name) {
    const r = await fetch(`/api/experiments/${eid}/${path}`, {headers: auth()});
    if (!r.ok) { $("error").textContent = "export failed: " + r.status; return; }
    const url = URL.createObjectURL(await r.blob());
    const a = document.createElement("a");
    a.href = url; a.download = name; document.body.appendChild(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  $("export-answers").addEventListener("click", () => download("answers.csv", `experiment-${eid}-answers.csv`));
  $("export-summary").addEventListener("click", () => download("summary.csv", `experiment-${eid}-summary.csv`));

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

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    if (text instanceof Node) td.appendChild(text); else td.textContent = text;
    tr.appendChild(td);
  }

  function drawTable(res) {
    const tbody = $("ranking").querySelector("tbody");
    tbody.textContent = "";
    res.ranking.slice(0, 30).forEach((row) => {
      const tr = document.createElement("tr");
      if (row.recommended) tr.className = "rec";
      tr.dataset.arm = row.arm;
      cell(tr, String(row.rank));
      cell(tr, row.text, "text");
      cell(tr, fmt(row.mean));
      cell(tr, ciSvg(row));
      cell(tr, String(row.count) + (row.pending ? ` (+${row.pending})` : ""), "count");
      cell(tr, Object.entries(row.labels).map(([k, v]) => `${k}: ${v}`).join(", "), "muted");
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

  function render(res) {
    const rewards = res.labels.map((l) => l.reward);
    rmin = Math.min(...rewards); rmax = Math.max(...rewards);
    $("title").textContent = res.name;
    $("status").textContent = res.done ? `${res.status} (learner done)` : res.status;
    $("n-answers").textContent = String(res.n_answers);
    $("n-pending").textContent = String(res.n_pending);
    $("n-items").textContent = String(res.ranking.length);
    $("algorithm").textContent = `${res.algorithm} ${JSON.stringify(res.params)}`;
    $("recommendation").textContent = res.recommendation.map((r) => r.text).join(" | ");
    const s = res.stopping;
    $("progress-bar").style.width = `${Math.round(100 * s.fraction)}%`;
    let text = s.done ? "stopped: the learner's stopping rule fired" :
      (s.budget ? `${s.n_pulls} of ${s.budget} answers (budget)` :
       `${s.separated} of ${res.ranking.length - res.recommendation.length} other items separated from the recommendation by the intervals`);
    $("progress-text").textContent = `${Math.round(100 * s.fraction)}% — ${text}`;
    $("label-totals").textContent = Object.entries(res.label_totals).map(([k, v]) => `${k}: ${v}`).join(" · ");
    drawTable(res); drawAllocation(res); drawTimeline(res);
    document.body.dataset.version = String(res.version);
  }

  async function poll() {
    clearTimeout(timer);
    if (!token) { askToken("Enter the owner token to open this dashboard."); return; }
    try {
      const r = await fetch(`/api/experiments/${eid}/results`, {headers: auth()});
      if (r.status === 401) { askToken("Invalid owner token."); return; }
      if (!r.ok) { $("error").textContent = `results: ${r.status}`; }
      else { $("error").textContent = ""; render(await r.json()); }
    } catch (e) { $("error").textContent = "connection lost, retrying…"; }
    timer = setTimeout(poll, 1000);
  }
  poll();
})();
