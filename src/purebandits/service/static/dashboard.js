// Dashboard: polls one page of the owner results every second (the server searches, sorts and pages the
// ranking), and the history and activity behind the charts (BokehJS) at most every 5 s, when they changed.
// The owner token comes from the URL fragment (#token=...) or the form; it is sent only as a
// Bearer header. The fragment is cleared from the address bar and the history at once (the token
// stays in this tab's sessionStorage, so a reload still works). All item text is inserted with
// textContent (and into BokehJS tooltips as data fields, which it escapes).
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("config").textContent);
  const eid = cfg.experiment_id;
  // every learner class's kind, paper and parameter defaults (rendered by the server, public facts)
  const META = JSON.parse(document.getElementById("learners-meta").textContent);
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = "pb.token." + eid;
  const PAGE = 30;            // ranking rows per page
  const CHARTS_EVERY = 5000;  // ms between two fetches of /history and /activity (when the results changed)
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
  // the ranking page shown: the server filters (q: item text or id), sorts and cuts it
  const view = {offset: 0, q: "", sort: "rank", order: "asc"};

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
  function confirmStop() { if (confirm("Stop the experiment for good?")) control("stop"); }
  ["pause", "resume"].forEach((a) => $(a).addEventListener("click", () => control(a)));
  $("stop").addEventListener("click", confirmStop);
  $("done-stop").addEventListener("click", confirmStop);

  async function download(path, name) {
    const r = await send(`/api/experiments/${eid}/${path}`, {headers: auth()}, "the export");
    if (r === null) return;
    if (!r.ok) {  // the server's reason when it gives one (a busy server: "retry in a few seconds")
      let why = String(r.status);
      try { why = (await r.json()).detail || why; } catch (e) { /* not JSON */ }
      $("error").textContent = "export failed: " + why;
      return;
    }
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
  // every learner's participants and results over time (each row names its learner)
  $("export-participants").addEventListener("click", () => download("participants.csv", `experiment-${eid}-participants.csv`));
  $("export-history").addEventListener("click", () => download("history.csv", `experiment-${eid}-history.csv`));

  // Pause / Resume / Stop take only what the status allows: a stopped (or archived) experiment takes none
  const CONTROL_TITLES = {
    pause: {paused: "the experiment is paused", stopped: "the experiment is stopped for good", archived: "the experiment is archived"},
    resume: {active: "the experiment is running", stopped: "the experiment is stopped for good: it cannot be resumed", archived: "the experiment is archived"},
    stop: {stopped: "the experiment is stopped", archived: "the experiment is archived"},
  };
  function drawControls(status) {
    const allowed = {pause: status === "active", resume: status === "paused", stop: status === "active" || status === "paused"};
    Object.keys(allowed).forEach((name) => {
      const b = $(name);
      b.disabled = !allowed[name];
      const why = allowed[name] ? "" : (CONTROL_TITLES[name][status] || "");
      if (why) b.title = why; else b.removeAttribute("title");
    });
  }

  // a count with thousands separators: a contest's 1,000,000 answers, not 1000000
  function count(n) { return Number(n).toLocaleString("en-US"); }
  function fmt(x, d) { return x === null || x === undefined ? "–" : Number(x).toFixed(d === undefined ? 3 : d); }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function when(unixSeconds) {
    const d = new Date(unixSeconds * 1000), today = new Date();
    return d.toDateString() === today.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  }

  let rmin = 0, rmax = 1;  // reward range of the label set, the x axis of the interval plots
  const clip = (v) => Math.min(rmax, Math.max(rmin, v));

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
    const c = clip(v);
    const clipped = lowerEnd ? v < rmin : v > rmax;
    return {text: (clipped ? (lowerEnd ? "≤ " : "≥ ") : "") + fmt(c, 2), clipped, value: c};
  }

  function intervalCell(row) {
    const box = el("div", "ci-box");
    box.appendChild(ciSvg(row));
    const lo = clipEnd(row.lower, true), hi = clipEnd(row.upper, false);
    box.appendChild(el("span", "ci-text", `[${lo.text}, ${hi.text}]`));
    let title = `interval [${lo.value === null ? "–" : fmt(lo.value, 3)}, ${hi.value === null ? "–" : fmt(hi.value, 3)}]`;
    if (row.mean !== null) title = `mean ${fmt(clip(row.mean), 3)}, ` + title;
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

  // ---- the ranking: one page, searched, sorted and cut by the server
  let labelNames = [];
  let pairwise = false;  // a pairwise experiment: its mean is the Borda score, and Bradley-Terry strengths are shown
  function columns() {
    // [sort key or null, header, card label]
    return [["rank", "#"], ["text", "item"], ["mean", pairwise ? "Borda score" : "mean"], [null, "interval"],
      ["count", "answers"],
      ...labelNames.map((n) => ["label:" + n, n])];
  }
  const SORT_NAMES = {rank: "rank", text: "item text", mean: "mean", lower: "lower bound", upper: "upper bound",
    count: "answers"};
  const sortName = (key) => (pairwise && key === "mean" ? "Borda score" : SORT_NAMES[key]) || (key.startsWith("label:") ? `“${key.slice(6)}” answers` : key);
  const defaultOrder = (key) => (key === "rank" || key === "text" ? "asc" : "desc");

  function sortButton(key, text) {
    const b = el("button", "sort", text);
    b.type = "button"; b.dataset.sort = key;
    b.addEventListener("click", () => setSort(key, view.sort === key ? (view.order === "asc" ? "desc" : "asc") : defaultOrder(key)));
    return b;
  }

  function buildHeader() {
    const tr = $("ranking").querySelector("thead tr");
    tr.textContent = "";
    columns().forEach(([key, text]) => {
      const th = el("th", "");
      if (key) { th.dataset.sort = JSON.stringify([key]); th.appendChild(sortButton(key, text)); }
      else {  // the interval column sorts by either end
        th.dataset.sort = JSON.stringify(["lower", "upper"]);
        const ends = el("span", "sort-ends muted");
        ends.append("(", sortButton("lower", "lower"), " · ", sortButton("upper", "upper"), ")");
        th.append("interval ", ends);
      }
      if (key === "count" || (key && key.startsWith("label:"))) th.className = "num";
      tr.appendChild(th);
    });
    const sel = $("sort-select");
    sel.textContent = "";
    ["rank", "text", "mean", "lower", "upper", "count", ...labelNames.map((n) => "label:" + n)].forEach((key) => {
      const o = el("option", "", sortName(key)); o.value = key; sel.appendChild(o);
    });
    markSort();
  }

  function markSort() {
    $("ranking").querySelectorAll("thead th").forEach((th) => {
      const keys = JSON.parse(th.dataset.sort);
      if (keys.includes(view.sort)) th.setAttribute("aria-sort", view.order === "asc" ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    $("ranking").querySelectorAll("thead button.sort").forEach((b) => {
      b.classList.toggle("active", b.dataset.sort === view.sort);
      b.dataset.order = b.dataset.sort === view.sort ? view.order : "";
    });
    $("sort-select").value = view.sort;
    $("sort-order").textContent = view.order === "asc" ? "↑" : "↓";
    $("sort-order").setAttribute("aria-label", view.order === "asc" ? "ascending: click for descending" : "descending: click for ascending");
  }

  function setSort(key, order) {
    view.sort = key; view.order = order; view.offset = 0;
    markSort();
    poll();
  }
  $("sort-select").addEventListener("change", () => setSort($("sort-select").value, defaultOrder($("sort-select").value)));
  $("sort-order").addEventListener("click", () => setSort(view.sort, view.order === "asc" ? "desc" : "asc"));

  let searchTimer = null;
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      const q = $("search").value.trim();
      if (q === view.q) return;
      view.q = q; view.offset = 0;
      poll();
    }, 300);
  });
  $("page-prev").addEventListener("click", () => { view.offset = Math.max(0, view.offset - PAGE); poll(); });
  $("page-next").addEventListener("click", () => { view.offset += PAGE; poll(); });

  function drawTable(res) {
    const names = res.labels.map((l) => l.name);
    const pair = res.query === "pairwise";
    if (JSON.stringify(names) !== JSON.stringify(labelNames) || pair !== pairwise) {
      labelNames = names; pairwise = pair; buildHeader();
      $("ranking-note").textContent = pair
        ? "(Borda score: the estimated probability of beating a uniformly drawn other item, with the learner's " +
          "confidence interval; won and lost count the comparisons of the learner's item)"
        : "(mean reward with the learner's confidence interval, clipped to the reward range)";
      $("pairwise-section").hidden = !pair;
    }
    const heads = columns().map(([, h]) => h);
    const tbody = $("ranking").querySelector("tbody");
    tbody.textContent = "";
    res.ranking.forEach((row) => {
      const tr = document.createElement("tr");
      if (row.recommended) tr.className = "rec";
      tr.dataset.arm = row.arm;
      tr.dataset.id = row.id;
      cell(tr, String(row.rank), "rank");
      cell(tr, row.text, "text").title = `item id ${row.id}`;
      cell(tr, fmt(row.mean), "mean");
      const [box, title] = intervalCell(row);
      cell(tr, box, "interval").title = title;
      cell(tr, String(row.count) + (row.pending ? ` (+${row.pending})` : ""), "count");
      labelNames.forEach((n) => cell(tr, String(row.labels[n] || 0), "label-count"));
      // the column names, for the one-card-per-item layout of narrow screens
      heads.forEach((h, i) => { tr.children[i].dataset.label = h; });
      tbody.appendChild(tr);
    });
  }

  // "1–30 of 138"; with a search, of the matching items, and "12 of 138 match"
  function drawPager(res) {
    const searching = Boolean(res.q !== undefined ? res.q : view.q);
    const total = searching && typeof res.n_matching === "number" ? res.n_matching : res.n_items;
    const offset = res.offset || 0, shown = res.ranking.length;
    if (!shown && offset > 0 && total > 0) {  // the list shrank under this page: go to its last page
      view.offset = Math.floor((total - 1) / PAGE) * PAGE;
      return false;
    }
    $("page-count").textContent = shown ? `${offset + 1}–${offset + shown} of ${total}` : (searching ? "no match" : "no items");
    $("page-prev").disabled = offset <= 0;
    $("page-next").disabled = offset + shown >= total;
    $("match-count").hidden = !searching;
    $("match-count").textContent = searching ? `${total} of ${res.n_items} match “${view.q}”` : "";
    return true;
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
        b.addEventListener("click", () => {
          if (label !== learner) { learner = label; view.offset = 0; drawTabs(); poll(); }
        });
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
    if (!r.ok || mine !== seq) return;
    const cmp = await r.json();
    if (mine !== seq) return;
    lastCmp = cmp;
    drawComparison(cmp);
    if (lastRes) drawDone(lastRes, cmp);  // the banner names every learner that stopped
  }

  // ---- stopping progress in words: the rule as the server describes it, the fraction as a bar (or, when
  // the learner cannot measure it, the reason instead), the margin (the rule's statistic minus its
  // threshold: it stops at 0); a server without these words sends only the fraction and counts
  function drawStopping(res) {
    const s = res.stopping || {};
    const num = (x) => typeof x === "number" && isFinite(x);
    const frac = num(s.fraction) ? Math.min(1, Math.max(0, s.fraction)) : null;
    const pct = frac === null ? null : Math.round(100 * frac);
    $("stopping-description").textContent = s.description || "";
    $("stopping-description").hidden = !s.description;
    const reason = s.reason || null;
    $("progress").hidden = Boolean(reason) || frac === null;
    $("stopping-reason").hidden = !reason;
    $("stopping-reason").textContent = !reason ? "" : reason + (s.done ? " (it has stopped)." : ".") +
      (num(s.budget) ? ` ${s.n_pulls} of its budget of ${s.budget} answers spent.` : "");
    if (frac !== null) {
      $("progress-bar").style.width = `${pct}%`;
      $("progress").setAttribute("aria-valuenow", String(pct));
    }
    let text = "";
    if (!reason && frac !== null) {
      text = `${pct}%`;
      if (num(s.separated) && num(s.of)) text += ` — ${s.separated} of ${s.of} items decided`;
      else if (!s.description) {
        text += " — " + (s.done ? "stopped: the learner's stopping rule fired" :
          (s.budget ? `${s.n_pulls} of ${s.budget} answers (budget)` :
            `${s.separated} of ${res.n_items - res.recommendation.length} other items separated from the recommendation by the intervals`));
      }
    }
    $("progress-text").textContent = text;
    $("progress-text").hidden = !text;
    const m = s.margin;
    let margin = "";
    if (num(m)) {
      margin = `margin ${m >= 0 ? "+" : ""}${fmt(m, 3)}`;
      if (num(s.statistic) && num(s.threshold)) margin += ` (statistic ${fmt(s.statistic, 3)} − threshold ${fmt(s.threshold, 3)})`;
      margin += s.done ? "" : m >= 0 ? ": at the threshold" : ": the learner stops when it reaches 0";
    } else if ("margin" in s && !reason && !s.done) {
      margin = "margin: – (not defined yet)";
    }
    $("margin-text").textContent = margin;
    $("margin-text").hidden = !margin;
    drawError(s);
    drawForecast(s);
  }

  // ---- the error probability in the owner's terms: what was asked, and the learner's own delta with the
  // reason it differs (or why the asked value is not guaranteed); a server without these fields sends none
  function errorSentence(e) {
    return e && e.delta_note ? e.delta_note : "";
  }

  function drawError(s) {
    const text = errorSentence(s);
    $("error-text").textContent = text;
    $("error-text").hidden = !text;
  }

  // ---- how far the decision is: the answers still needed if the current estimates hold (a range), or
  // why there is no such number
  function drawForecast(s) {
    const f = s.forecast;
    let text = "";
    if (s.done) text = "";
    else if (f && typeof f.mid === "number") {
      const n = (x) => Math.round(x).toLocaleString("en-US");
      const answers = (x) => `${n(x)} more answer${Math.round(x) === 1 ? "" : "s"}`;
      text = f.exact ? `${answers(f.mid)} (its fixed budget).`
        : `About ${answers(f.mid)} (range ${n(f.low)}–${n(f.high)}) if the current estimates hold.`;
    } else if (s.forecast_reason) {
      text = `No forecast of the answers still needed: ${s.forecast_reason}.`;
    }
    const p = $("forecast-text");
    p.textContent = text;
    p.title = f && f.method ? `How: ${f.method}` : "";
    p.hidden = !text;
  }

  // ---- a learner stopped: a banner at the top with its recommendation and what happens next; with several
  // learners it names every one that stopped (from the comparison), whichever learner's tab is shown
  let onDoneDirty = false;  // the owner is editing the on-done form: the polls leave it alone
  let lastRes = null, lastCmp = null;

  function recommendationText(p, rec) {
    rec.forEach((r, i) => {
      if (i) p.append(", ");
      p.append("“");
      p.appendChild(el("strong", "rec-item", r.text));
      p.append("”");
    });
  }

  function drawDone(res, cmp) {
    const multi = learners.length > 1;
    const banner = $("done-banner"), form = $("on-done"), p = $("done-text"), list = $("done-list");
    // the learners that stopped: this one (one learner), or each of the comparison's (several)
    const all = multi && cmp ? cmp.algorithms : [];
    const stopped = all.filter((a) => a.done);
    const done = multi ? stopped.length > 0 : Boolean(res.done);
    banner.hidden = !done;
    p.textContent = ""; list.textContent = "";
    list.hidden = !multi || !done;
    if (done && !multi) {
      const ld = res.learner_done;
      const n = ld ? ld.at_answers : (res.stopping && res.stopping.n_pulls !== undefined ? res.stopping.n_pulls : res.n_told);
      p.append(`The learner stopped after ${n} answers${ld && ld.at ? " at " + when(ld.at) : ""}: its recommendation is `);
      recommendationText(p, res.recommendation);
      p.append(".");
    } else if (done) {
      const running = all.filter((a) => !a.done).map((a) => a.label);
      p.append(stopped.length === all.length ? `Every learner has stopped (${all.length}).`
        : `${stopped.length} of ${all.length} learners have stopped; ${running.join(", ")} ${running.length === 1 ? "is" : "are"} still running.`);
      stopped.forEach((a) => {
        const li = el("li", "");
        li.dataset.label = a.label;
        const n = a.stopped_at_answers === null || a.stopped_at_answers === undefined ? "?" : a.stopped_at_answers;
        li.appendChild(el("b", "", a.label));
        li.append(` stopped after ${n} answers${a.stopped_at ? " at " + when(a.stopped_at) : ""}: its recommendation is `);
        recommendationText(li, a.recommendation || []);
        li.append(".");
        list.appendChild(li);
      });
    }
    if (done) {
      p.append(" " + ({stopped: "The experiment is stopped.", archived: "The experiment is archived.",
        paused: "The experiment is still paused."}[res.status] || "The experiment is still open to participants."));
      $("done-stop").hidden = res.status === "stopped" || res.status === "archived";
    }
    // the on-done settings: in the banner once a learner stopped, else under the stopping progress
    const home = done ? $("done-slot") : $("on-done-home");
    if (form.parentNode !== home) home.appendChild(form);
    const od = res.on_done;
    form.hidden = !od;  // an older server without on-done settings
    if (!od) return;
    $("on-done-title").textContent = multi ? "When every learner has stopped" : "When the learner stops";
    $("auto-stop-text").textContent = multi ? "Stop the experiment when every learner has stopped"
      : "Stop the experiment when the learner stops";
    if (!onDoneDirty && !form.contains(document.activeElement)) {
      $("auto-stop").checked = Boolean(od.auto_stop);
      $("webhook-url").value = od.webhook_url || "";
    }
    drawWebhook(od);
  }

  function drawWebhook(od) {
    const st = $("webhook-status"), w = od.webhook;
    st.classList.remove("ok", "failed");
    if (w && w.called_at) {
      const ok = !w.error && w.status !== null && w.status >= 200 && w.status < 300;
      st.textContent = `Webhook called at ${when(w.called_at)}: ` +
        (ok ? `HTTP ${w.status}, delivered.` : `failed (${w.error || "HTTP " + w.status}).`);
      st.classList.add(ok ? "ok" : "failed");
    } else if (od.webhook_url) {
      st.textContent = "The webhook has not been called yet.";
    } else {
      st.textContent = "";
    }
    st.hidden = !st.textContent;
  }

  // a new webhook URL's signing secret: in the answer that set it, never again; shown until the form is edited
  function showSecret(secret) {
    $("webhook-secret-value").textContent = secret || "";
    $("webhook-secret").hidden = !secret;
  }

  $("on-done").addEventListener("input", () => {
    onDoneDirty = true; $("on-done-message").textContent = ""; showSecret(null);
  });
  $("on-done").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const url = $("webhook-url").value.trim();
    const body = {auto_stop: $("auto-stop").checked, webhook_url: url || null};
    const r = await send(`/api/experiments/${eid}/on-done`, {method: "POST",
      headers: {...auth(), "Content-Type": "application/json"}, body: JSON.stringify(body)}, "saving");
    const msg = $("on-done-message");
    if (r === null) { msg.textContent = "Not saved (no connection)."; return; }
    if (r.status === 401) { rejected(); return; }
    const d = await r.json().catch(() => ({}));
    if (!r.ok) {
      const detail = Array.isArray(d.detail) ? d.detail.map((x) => x.msg).join("; ") : (d.detail || r.statusText);
      msg.textContent = `Not saved: ${detail}`;
      return;
    }
    onDoneDirty = false;
    $("auto-stop").checked = Boolean(d.auto_stop);
    $("webhook-url").value = d.webhook_url || "";
    drawWebhook(d);
    showSecret(d.webhook_secret);
    msg.textContent = "Saved.";
    poll();
  });

  function render(res) {
    const rewards = res.labels.map((l) => l.reward);
    rmin = Math.min(...rewards); rmax = Math.max(...rewards);
    $("title").textContent = res.name;
    $("status").textContent = res.done ? `${res.status} (learner done)` : res.status;
    $("n-answers").textContent = count(res.n_answers);
    $("n-pending").textContent = count(res.n_pending);
    $("n-items").textContent = count(res.n_items);
    $("algorithm").textContent = `${learners.length > 1 ? res.algorithm_label + " · " : ""}${res.algorithm}`;
    // before any answer the learner's recommendation is an arbitrary pick: not shown as a result
    $("recommendation").textContent = res.n_answers ? res.recommendation.map((r) => r.text).join(" | ")
      : "none yet (no answers)";
    $("label-totals").textContent = Object.entries(res.label_totals).map(([k, v]) => `${k}: ${v}`).join(" · ");
    drawStopping(res);
    drawControls(res.status);
    lastRes = res;
    drawDone(res, lastCmp);
    drawTable(res);
    document.body.dataset.version = String(res.version);
  }

  // ---- the learners' settings in words: label, algorithm, paper, one "name = value" line per parameter,
  // and the stopping rule of its kind
  function valueText(v) {
    if (v === null || v === undefined) return "default";
    return typeof v === "string" ? v : JSON.stringify(v);
  }

  function stoppingRule(kind, params, defaults, k, error) {
    const get = (name) => (name in params ? params[name] : defaults[name]);
    if (kind === "fixed_confidence") {
      // the rule itself (bounds, statistic, threshold) is the learner's own sentence under "Stopping progress"
      if (error && error.delta_note) {
        return `Stops when its own stopping rule has decided the top ${k}. ${errorSentence(error)}`;
      }
      return `Stops when its own stopping rule is certain of the top ${k} at error probability ` +
        `delta = ${valueText(get("delta"))} (the rule in words: under Stopping progress).`;
    }
    if (kind === "fixed_budget") return `Stops after budget = ${valueText(get("budget"))} answers.`;
    if (kind === "anytime") return "Never stops by itself; the owner stops it.";
    return `Stopping rule: ${kind}.`;
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
      row("stopping", el("dd", "stopping", stoppingRule(m.kind, params, m.defaults || {}, k, a.error)));
      if (m.kind !== "fixed_confidence" && a.error && a.error.delta_note) {
        row("error probability", el("dd", "error-note", errorSentence(a.error)));
      }
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

  // ---------------------------------------------------------------- charts (BokehJS)
  // Each chart is one Bokeh figure whose ColumnDataSources are created once and given new columns on
  // every fetch (the figure is not rebuilt); each chart's box carries data-rows, the rows it shows.
  const Bk = window.Bokeh && window.Bokeh.Plotting ? window.Bokeh : null;
  const COLORS = ["#2458d6", "#e8590c", "#2f9e44", "#c2255c", "#7048e8", "#0c8599", "#a0631b", "#5c940d",
    "#d6336c", "#495057"];
  const GREY = "#adb5bd";
  const charts = {made: false, leaders: {}, progress: null, margin: null};
  let chartsAt = 0, chartsKey = null, chartsBusy = false;

  // local time shown by a datetime axis (BokehJS formats datetimes in UTC): shift by the local offset
  const localMs = (unixSeconds) => unixSeconds * 1000 - new Date(unixSeconds * 1000).getTimezoneOffset() * 60000;

  function figure(opts) {
    const f = Bk.Plotting.figure(Object.assign({
      sizing_mode: "stretch_width", height: 230, hidpi: true,
      tools: "box_zoom,wheel_zoom,reset,save", active_drag: null, active_scroll: null,
      toolbar_location: "right", min_border_left: 8, min_border_right: 8, min_border_top: 8,
      outline_line_color: null, background_fill_color: "#ffffff", border_fill_color: "#ffffff",
    }, opts));
    f.toolbar.logo = null;
    f.xaxis.axis_label_text_font_style = "normal";
    f.yaxis.axis_label_text_font_style = "normal";
    f.xaxis.axis_label_text_font_size = "12px";
    f.yaxis.axis_label_text_font_size = "12px";
    // tick labels that would overlap on a narrow screen are left out
    f.xaxis.major_label_policy = new Bk.NoOverlap();
    f.xgrid.grid_line_color = "#eef0f4";
    f.ygrid.grid_line_color = "#eef0f4";
    return f;
  }
  function hover(f, renderers, tooltips, extra) {
    f.add_tools(new Bk.HoverTool(Object.assign({renderers, tooltips}, extra || {})));
  }
  function source(columns) { return new Bk.ColumnDataSource({data: columns}); }
  function setData(src, data) { src.data = data; }
  // how many rows a chart shows (the tests read it), and words over a chart with nothing to show yet
  // instead of an empty frame that looks broken
  function mark(id, n, empty, shown = n > 0) {
    const box = $(id);
    box.dataset.rows = String(n);
    let note = box.previousElementSibling;
    if (!note || !note.classList.contains("chart-empty")) {
      note = document.createElement("p");
      note.className = "muted chart-note chart-empty";
      box.before(note);
    }
    note.textContent = shown ? "" : (empty || "Nothing yet: this chart fills in as participants answer.");
    box.classList.toggle("chart-waiting", !shown);
  }
  function show(f, box) { return Bk.Plotting.show(f, box); }
  function yRange() {
    const pad = 0.04 * (rmax - rmin || 1);
    return new Bk.Range1d({start: rmin - pad, end: rmax + pad});
  }

  function makeCharts() {
    charts.made = true;
    // (c) answers over time
    const tl = source({x: [], top: [], start: [], n: [], total: [], width: []});
    const tx = new Bk.Range1d({start: localMs(Date.now() / 1000 - 60), end: localMs(Date.now() / 1000)});
    let f = figure({x_axis_type: "datetime", x_axis_label: "time (local)", y_axis_label: "answers", x_range: tx});
    // clock times at every zoom, the date once under the first tick
    const day = {microseconds: "%b %d", milliseconds: "%b %d", seconds: "%b %d", minsec: "%b %d", minutes: "%b %d",
      hourmin: "%b %d", hours: "%b %d", days: "%Y", months: "", years: ""};
    f.xaxis.formatter = new Bk.DatetimeTickFormatter({
      microseconds: "%H:%M:%S.%3N", milliseconds: "%H:%M:%S.%3N", seconds: "%H:%M:%S", minsec: "%H:%M:%S",
      minutes: "%H:%M", hourmin: "%H:%M", hours: "%H:%M", days: "%b %d", months: "%b %Y", years: "%Y",
      context: new Bk.DatetimeTickFormatter(day),
    });
    let r = f.vbar({x: {field: "x"}, top: {field: "top"}, width: {field: "width"}, source: tl,
      fill_color: "#2458d6", line_color: null, fill_alpha: 0.85});
    hover(f, [r], [["from", "@start{%F %H:%M:%S}"], ["answers", "@n"], ["answers so far", "@total"]],
      {formatters: {"@start": "datetime"}});
    charts.timeline = {fig: f, src: tl, range: tx};
    show(f, $("chart-timeline"));
    // (d) answers per item, in rank order, on a log scale: an adaptive learner gives its few leaders
    // hundreds of times the answers of the rest (contest size: ~10,000 against ~20), which a linear axis
    // flattens into a spike on the axis. Bars start at 0.5 so one answer shows; items with none are gaps.
    const al = source({x: [], top: [], n: [], color: []});
    f = figure({x_axis_label: "rank", y_axis_label: "answers (log scale)", y_axis_type: "log"});
    f.yaxis.formatter = new Bk.NumeralTickFormatter({format: "0,0.[0]"});
    r = f.vbar({x: {field: "x"}, top: {field: "top"}, bottom: 0.5, width: 0.85, source: al,
      fill_color: {field: "color"}, line_color: null});
    hover(f, [r], [["rank", "@x"], ["answers", "@n"]]);
    charts.allocation = {fig: f, src: al};
    show(f, $("chart-allocation"));
    // (e) answers per participant
    const pa = source({left: [], right: [], top: [], range: []});
    f = figure({x_axis_label: "answers per participant", y_axis_label: "participants"});
    f.yaxis.formatter = new Bk.NumeralTickFormatter({format: "0,0.[0]"});
    r = f.quad({left: {field: "left"}, right: {field: "right"}, top: {field: "top"}, bottom: 0, source: pa,
      fill_color: "#7048e8", line_color: "#ffffff", fill_alpha: 0.85});
    hover(f, [r], [["answers", "@range"], ["participants", "@top"]]);
    charts.participants = {fig: f, src: pa};
    show(f, $("chart-participants"));
    // (f) response times
    const rs = source({left: [], right: [], top: [], range: []});
    f = figure({x_axis_label: "seconds from question to answer", y_axis_label: "answers"});
    f.yaxis.formatter = new Bk.NumeralTickFormatter({format: "0,0.[0]"});
    f.xaxis.formatter = new Bk.BasicTickFormatter({use_scientific: false});
    r = f.quad({left: {field: "left"}, right: {field: "right"}, top: {field: "top"}, bottom: 0, source: rs,
      fill_color: "#0c8599", line_color: "#ffffff", fill_alpha: 0.85});
    hover(f, [r], [["seconds", "@range"], ["answers", "@top"]]);
    const median = new Bk.Span({location: 0, dimension: "height", line_color: "#1d2430", line_dash: "dashed",
      line_width: 1.5, visible: false});
    f.add_layout(median);
    charts.response = {fig: f, src: rs, median};
    show(f, $("chart-response"));
  }

  // (b) stopping progress and margin: one line per learner (a legend when there are several)
  function makeProgressCharts(labels) {
    const multi = labels.length > 1;
    const fp = figure({x_axis_label: "answers", y_axis_label: "stopping progress",
      y_range: new Bk.Range1d({start: 0, end: 1.04})});
    fp.yaxis.formatter = new Bk.NumeralTickFormatter({format: "0%"});
    const fm = figure({x_axis_label: "answers", y_axis_label: "margin"});
    fm.add_layout(new Bk.Span({location: 0, dimension: "width", line_color: "#98a2b3", line_dash: "dashed"}));
    const srcs = {}, msrcs = {}, items = [[], []], lines = [[], []];
    labels.forEach((label, i) => {
      const color = COLORS[i % COLORS.length];
      const src = source({x: [], fraction: [], t: [], learner: []});
      const msrc = source({x: [], margin: [], t: [], learner: []});
      const rp = fp.line({field: "x"}, {field: "fraction"}, {source: src, line_color: color, line_width: 2});
      const rm = fm.line({field: "x"}, {field: "margin"}, {source: msrc, line_color: color, line_width: 2});
      items[0].push(new Bk.LegendItem({label: {value: label}, renderers: [rp]}));
      items[1].push(new Bk.LegendItem({label: {value: label}, renderers: [rm]}));
      lines[0].push(rp); lines[1].push(rm);
      srcs[label] = src;
      msrcs[label] = msrc;
    });
    const tip = [["learner", "@learner"], ["answers", "@x"], ["time", "@t{%F %H:%M:%S}"]];
    hover(fp, lines[0], [...tip, ["progress", "@fraction{0.0%}"]], {mode: "vline", formatters: {"@t": "datetime"}});
    hover(fm, lines[1], [...tip, ["margin", "@margin{+0.000}"]], {mode: "vline", formatters: {"@t": "datetime"}});
    if (multi) {  // one line of legend above the plot, where it hides no line
      [fp, fm].forEach((f, j) => f.add_layout(new Bk.Legend({items: items[j], orientation: "horizontal",
        location: "top_left", label_text_font_size: "12px", spacing: 12, padding: 2, margin: 0,
        border_line_alpha: 0, glyph_width: 18}), "above"));
    }
    charts.progress = {fig: fp, srcs};
    charts.margin = {fig: fm, srcs: msrcs};
    show(fp, $("chart-progress"));
    show(fm, $("chart-margin"));
  }

  // (a) the leaders of one learner: a line per item (its mean), a band (its interval, clipped to the
  // reward range), points to hover; the current leaders in colour, earlier ones in grey
  function makeLeadersChart(label, multi) {
    const box = el("div", "chart-cell");
    box.dataset.learner = label;
    if (multi) box.appendChild(el("h3", "chart-learner", label));
    const target = el("div", "chart-box");
    target.id = `chart-leaders-${Object.keys(charts.leaders).length}`;
    box.appendChild(target);
    $("chart-leaders").appendChild(box);
    const band = source({xs: [], ys: [], color: []});
    const lines = source({xs: [], ys: [], color: [], width: []});
    const pts = source({x: [], y: [], lower: [], upper: [], interval: [], text: [], id: [], rank: [], color: []});
    const f = figure({x_axis_label: "answers", y_axis_label: "mean reward", y_range: yRange()});
    f.patches({field: "xs"}, {field: "ys"}, {source: band, fill_color: {field: "color"}, fill_alpha: 0.12, line_alpha: 0});
    f.multi_line({field: "xs"}, {field: "ys"}, {source: lines, line_color: {field: "color"}, line_width: {field: "width"}});
    const rp = f.scatter({field: "x"}, {field: "y"}, {source: pts, size: 5, fill_color: {field: "color"}, line_color: null});
    hover(f, [rp], [["item", "@text"], ["item id", "@id"], ["answers", "@x"], ["rank then", "@rank"],
      ["mean", "@y{0.000}"], ["interval", "@interval"]]);
    charts.leaders[label] = {fig: f, band, lines, pts, target};
    show(f, target);
  }

  function leadersData(points) {
    // the items that lead at the last point get colours in their rank order
    const lastLeaders = points.length ? points[points.length - 1].leaders : [];
    const colorOf = {};
    lastLeaders.forEach((ld, i) => { colorOf[ld.arm] = COLORS[i % COLORS.length]; });
    const runs = {};  // arm -> list of runs (consecutive points where the item led)
    const pts = {x: [], y: [], lower: [], upper: [], interval: [], text: [], id: [], rank: [], color: []};
    points.forEach((p, i) => {
      p.leaders.forEach((ld) => {
        if (ld.mean === null || ld.mean === undefined) return;
        const bounded = typeof ld.lower === "number" && typeof ld.upper === "number";
        const lo = clip(bounded ? ld.lower : rmin), hi = clip(bounded ? ld.upper : rmax);
        // a band only where the interval says something: one covering the whole reward range is left out
        const banded = bounded && (lo > rmin || hi < rmax);
        const y = clip(ld.mean), color = colorOf[ld.arm] || GREY;
        const list = runs[ld.arm] || (runs[ld.arm] = []);
        let run = list[list.length - 1];
        if (!run || run.last !== i - 1) { run = {x: [], y: [], bands: [], color, last: i}; list.push(run); }
        run.x.push(p.n_answers); run.y.push(y); run.last = i;
        // the band: consecutive points with both bounds
        let band = run.bands[run.bands.length - 1];
        if (banded) {
          if (!band || band.last !== i - 1) { band = {x: [], lo: [], hi: [], last: i}; run.bands.push(band); }
          band.x.push(p.n_answers); band.lo.push(lo); band.hi.push(hi); band.last = i;
        }
        pts.x.push(p.n_answers); pts.y.push(y); pts.lower.push(bounded ? lo : NaN); pts.upper.push(bounded ? hi : NaN);
        pts.interval.push(bounded ? `[${fmt(lo)}, ${fmt(hi)}]` : "none (no bounds)");
        pts.text.push(ld.text === undefined ? `item ${ld.arm}` : ld.text); pts.id.push(ld.id === undefined ? "" : String(ld.id));
        pts.rank.push(ld.rank); pts.color.push(color);
      });
    });
    const band = {xs: [], ys: [], color: []}, lines = {xs: [], ys: [], color: [], width: []};
    // grey (earlier leaders) first, so the current leaders are drawn on top
    const all = Object.entries(runs).flatMap(([arm, list]) => list.map((run) => [arm in colorOf, run]));
    all.sort((a, b) => Number(a[0]) - Number(b[0]));
    all.forEach(([current, run]) => {
      lines.xs.push(run.x); lines.ys.push(run.y); lines.color.push(run.color); lines.width.push(current ? 2 : 1);
      if (current) {
        run.bands.forEach((b) => {
          band.xs.push([...b.x, ...b.x.slice().reverse()]);
          band.ys.push([...b.hi, ...b.lo.slice().reverse()]);
          band.color.push(run.color);
        });
      }
    });
    return {band, lines, pts};
  }

  function drawHistory(hist, answers) {
    const series = hist.series || [];
    const labels = series.map((s) => s.algorithm);
    if (!charts.progress) makeProgressCharts(labels);
    const multi = labels.length > 1;
    let nLeaders = 0, nProgress = 0, nMargin = 0;
    series.forEach((s) => {
      if (!charts.leaders[s.algorithm]) makeLeadersChart(s.algorithm, multi);
      const c = charts.leaders[s.algorithm];
      const d = leadersData(s.points);
      setData(c.band, d.band); setData(c.lines, d.lines); setData(c.pts, d.pts);
      c.target.dataset.rows = String(d.pts.x.length);
      nLeaders += d.pts.x.length;
      const src = charts.progress.srcs[s.algorithm], msrc = charts.margin.srcs[s.algorithm];
      if (src) {
        const x = s.points.map((p) => p.n_answers), t = s.points.map((p) => localMs(p.t));
        const who = s.points.map(() => s.algorithm);
        setData(src, {x, fraction: s.points.map((p) => p.fraction), t, learner: who});
        // a learner without bounds has no margin: NaN leaves a gap in its line
        const margin = s.points.map((p) => (typeof p.margin === "number" ? p.margin : NaN));
        setData(msrc, {x: x.slice(), margin, t: t.slice(), learner: who.slice()});
        nProgress += s.points.length;
        nMargin += margin.filter((m) => !isNaN(m)).length;
      }
    });
    // the history has a point every `every` answers of a learner (and when it stops)
    // (answers collected before the server kept a history, as in a database from an older version, have none)
    const first = !hist.every ? "No history kept."
      : answers >= hist.every ? `No points for the ${count(answers)} answers so far (collected before this server kept ` +
        `a history); points follow every ${hist.every} answers from now on.`
      : `Nothing yet: the first point comes after ${hist.every} answers.`;
    mark("chart-leaders", nLeaders, first);
    mark("chart-progress", nProgress, first);
    mark("chart-margin", nMargin, first);
    // no margin at all (a learner without confidence bounds): words instead of an empty figure
    $("margin-note").textContent = nProgress && !nMargin ? "none: the learner's stopping rule gives no margin (yet)" : "";
    $("chart-margin").hidden = Boolean(nProgress && !nMargin);
    if ($("margin-note").textContent) $("chart-margin").previousElementSibling.textContent = "";  // said already
  }

  function ranges(edges, digits) {
    const out = [];
    for (let i = 0; i + 1 < edges.length; i++) {
      out.push(digits === 0 ? (Math.ceil(edges[i]) === Math.floor(edges[i + 1]) ? String(Math.ceil(edges[i]))
        : `${Math.ceil(edges[i])}–${Math.floor(edges[i + 1])}`) : `${fmt(edges[i], digits)}–${fmt(edges[i + 1], digits)}`);
    }
    return out;
  }
  function histogram(h, digits) {
    const e = h.edges || [], c = h.counts || [];
    return {left: e.slice(0, c.length), right: e.slice(1, c.length + 1), top: c.slice(), range: ranges(e, digits).slice(0, c.length)};
  }
  function duration(s) {
    if (s >= 86400) return `${fmt(s / 86400, s % 86400 ? 1 : 0)} d`;
    if (s >= 3600) return `${fmt(s / 3600, s % 3600 ? 1 : 0)} h`;
    if (s >= 60) return `${fmt(s / 60, s % 60 ? 1 : 0)} min`;
    return `${fmt(s, s % 1 ? 1 : 0)} s`;
  }
  function seconds(s) {
    if (s === null || s === undefined) return "–";
    return s < 1 ? `${Math.round(1000 * s)} ms` : s < 10 ? `${fmt(s, 1)} s` : duration(Math.round(s));
  }

  function drawActivity(act, res) {
    // (c) answers over time
    const tl = act.timeline || {buckets: [], bucket_seconds: 1};
    const w = tl.bucket_seconds || 1;
    let total = 0;
    const b = tl.buckets || [];
    setData(charts.timeline.src, {
      x: b.map(([t]) => localMs(t + w / 2)), top: b.map(([, n]) => n), start: b.map(([t]) => localMs(t)),
      n: b.map(([, n]) => n), total: b.map(([, n]) => (total += n)), width: b.map(() => 0.9 * w * 1000),
    });
    charts.timeline.fig.yaxis.axis_label = `answers per ${duration(w)}`;
    charts.timeline.first = b.length ? b[0][0] : null;
    charts.timeline.last = b.length ? b[b.length - 1][0] + w : null;
    charts.timeline.w = w;
    followNow(res);
    mark("chart-timeline", b.length);
    // (d) answers per item, the recommended ones in the accent colour
    const per = act.answers_per_item || [];
    const k = res.recommendation.length;
    setData(charts.allocation.src, {x: per.map((_, i) => i + 1), top: per.map((v) => (v > 0 ? v : NaN)), n: per.slice(),
      color: per.map((_, i) => (i < k ? "#2458d6" : "#98a2b3"))});
    mark("chart-allocation", per.length, undefined, per.some((v) => v > 0));  // one bar per item, maybe all 0
    // (e) participants
    const pa = act.participants || {n: 0, answers: {edges: [], counts: []}};
    const ph = pa.answers || {edges: [], counts: []};
    setData(charts.participants.src, histogram(ph, 0));
    $("participants-text").textContent = pa.n
      ? `(${count(pa.n)} participants; answers each: mean ${fmt(ph.mean, 1)}, median ${fmt(ph.median, 0)}, most ${ph.max})`
      : "(no participants yet)";
    mark("chart-participants", (ph.counts || []).length);
    // (f) response times
    const rs = act.response_seconds || {edges: [], counts: []};
    setData(charts.response.src, histogram(rs, 1));
    charts.response.median.location = rs.median === null || rs.median === undefined ? 0 : rs.median;
    charts.response.median.visible = typeof rs.median === "number";
    $("response-text").textContent = rs.n
      ? `(${count(rs.n)} answers: median ${seconds(rs.median)} (dashed), 90% within ${seconds(rs.p90)}` +
        (rs.above ? `; ${rs.above} slower not shown` : "") + ")"
      : "(no answers yet)";
    mark("chart-response", (rs.counts || []).length);
  }

  // the time axis runs from the first answer's bucket to now (a quiet spell shows as such), moved on
  // every poll -- unless the owner zoomed or panned it (then it stays where they put it)
  function followNow(res) {
    const tl = charts.timeline;
    if (!tl || tl.first === null || tl.first === undefined) return;
    const r = tl.range;
    if (tl.set && (r.start !== tl.set[0] || r.end !== tl.set[1])) return;
    const now = typeof res.now === "number" ? res.now : Date.now() / 1000;
    tl.set = [localMs(tl.first - tl.w), localMs(Math.max(tl.last, now) + tl.w)];
    // (and the reset tool comes back here)
    r.setv({start: tl.set[0], end: tl.set[1], reset_start: tl.set[0], reset_end: tl.set[1]});
  }

  async function getJson(path) {
    const r = await fetch(path, {headers: auth()});
    if (r.status === 401) { rejected(); return null; }
    if (!r.ok) throw new Error(`${path.split("?")[0].split("/").pop()}: ${r.status}`);
    return r.json();
  }

  // the history and activity: at most every CHARTS_EVERY ms, and only when the results changed (or
  // another learner is shown)
  async function pollCharts(mine, res) {
    if (!Bk) {
      $("charts-error").hidden = false;
      $("charts-error").textContent = "The charts could not be loaded (BokehJS is missing); the numbers above are complete.";
      return;
    }
    const key = `${res.algorithm_label}|${res.version}|${res.status}`;
    const shown = learner || "";
    const fresh = chartsKey === null || chartsKey.split("|")[0] !== res.algorithm_label;
    if (chartsBusy || (!fresh && (key === chartsKey || Date.now() - chartsAt < CHARTS_EVERY))) return;
    chartsBusy = true;
    try {
      const alg = shown ? `?algorithm=${encodeURIComponent(shown)}` : "";
      const [hist, act] = await Promise.all([
        getJson(`/api/experiments/${eid}/history?max_points=500`),  // every learner's series
        getJson(`/api/experiments/${eid}/activity${alg}`),
      ]);
      if (mine !== seq && (learner || "") !== shown) return;  // another learner by now
      if (hist === null || act === null) return;
      if (!charts.made) makeCharts();
      drawHistory(hist, res.n_answers);
      drawActivity(act, res);
      chartsKey = key; chartsAt = Date.now();
      $("charts-error").hidden = true;
    } catch (e) {
      if (e instanceof TypeError) return;  // the network: the results' poll says so
      $("charts-error").hidden = false;
      $("charts-error").textContent = `The charts could not be updated (${e.message}).`;
    } finally {
      chartsBusy = false;
    }
  }

  // ---- a pairwise experiment: the Bradley-Terry fit of every comparison, refetched when the results changed (at
  // most every CHARTS_EVERY ms); the first BT_ROWS items by strength
  const BT_ROWS = 30;
  let btKey = null, btAt = 0, btBusy = false;
  async function pollBradleyTerry(res) {
    const key = `${res.version}|${res.n_answers}`;
    if (btBusy || key === btKey || Date.now() - btAt < CHARTS_EVERY) return;
    btBusy = true;
    try {
      const r = await fetch(`/api/experiments/${eid}/bradley-terry`, {headers: auth()});
      if (r.status === 401) { rejected(); return; }
      const d = await r.json().catch(() => ({}));
      btKey = key; btAt = Date.now();
      drawBradleyTerry(r.ok ? d : null, typeof d.detail === "string" ? d.detail : String(r.status));
    } catch (e) { /* the network: the results' poll says so */ } finally { btBusy = false; }
  }

  // into the pairwise section's table, or with prefix "s2-" into the Stages section's (a staged experiment's stage 2)
  function drawBradleyTerry(bt, why, prefix = "") {
    const $p = (id) => $(prefix + id);
    const body = $p("bt-table").querySelector("tbody");
    body.textContent = "";
    $p("bt-note").hidden = !(bt && bt.note);
    $p("bt-note").textContent = bt && bt.note ? "Note: " + bt.note + "." : "";
    $p("bt-more").hidden = !(bt && bt.items.length > BT_ROWS);
    if (!bt) { $p("bt-summary").textContent = `No fit yet (${why}).`; return; }
    const c = bt.components;
    $p("bt-summary").textContent = `${count(bt.n_comparisons)} comparisons; the comparison graph is ` +
      (bt.strongly_connected ? "strongly connected (maximum-likelihood fit)."
        : `not strongly connected (${c} components): ridge alpha = ${bt.alpha}.`);
    bt.items.slice(0, BT_ROWS).forEach((row) => {
      const tr = document.createElement("tr");
      tr.dataset.id = row.id;
      cell(tr, String(row.rank), "rank");
      cell(tr, row.text, "text").title = `item id ${row.id}`;
      cell(tr, fmt(row.log_strength), "num");
      cell(tr, String(row.wins), "num");
      cell(tr, String(row.losses), "num");
      cell(tr, row.win_rate === null ? "–" : fmt(row.win_rate), "num");
      body.appendChild(tr);
    });
    $p("bt-more").textContent = `… ${count(bt.items.length - BT_ROWS)} more items (the win matrix has them all).`;
  }
  $("export-wins").addEventListener("click", () => download("wins.csv", `experiment-${eid}-wins.csv`));
  $("export-pairs").addEventListener("click", () => download("answers.csv?format=crowdkit", `experiment-${eid}-pairs.csv`));

  // ---- a staged experiment (ratings then comparisons): which stage runs, stage 1's top m (proven, or taken at the
  // ratings budget), stage 2's Borda ranking and Bradley-Terry strengths, and the winner once stage 2 stopped. The
  // stage block comes with every results poll; stage 2's results and the parent's /bradley-terry (stage 2's) are
  // refetched when stage 2's answers changed, at most every CHARTS_EVERY ms. Stage 2 has the same owner token.
  const STAGE_ROWS = 30;  // top m items and stage 2 rows shown
  const itemText = new Map();  // item id -> text, from the recommendation and stage 2's ranking
  let stageKey = null, stageAt = 0, stageBusy = false;

  function drawStages(res) {
    const st = res.stages;
    $("stages-section").hidden = !st;
    if (!st) return;
    if (st.stage_of !== undefined) {  // this is a stage 2: say whose, and link back
      $("stage-detail").hidden = true;
      $("stage-winner").hidden = true;
      $("stage-now").textContent = "";
      $("stage-now").append(`This is stage 2 (comparisons among the top ${st.arms ? st.arms.length : "m"}) of `);
      const a = el("a", "", `experiment ${st.stage_of}`);
      a.href = `/dashboard/${st.stage_of}`;
      $("stage-now").append(a, ".");
      return;
    }
    (res.recommendation || []).forEach((r) => itemText.set(r.id, r.text));
    const s1 = st.stage1 || {}, s2 = st.stage2, m = st.top_m, top = s1.top_m || [];
    const budget = st.ratings_budget;
    $("stage-now").textContent = st.stage === 1
      ? `Stage 1 of 2 is running: every item is rated until the top ${m} are found.`
      : (s2 && s2.done ? `Both stages are done: stage 2's comparisons have decided among the top ${m}.`
        : `Stage 2 of 2 is running: the top ${m} of stage 1 are compared in pairs.`);
    $("stages-section").dataset.stage = String(st.stage);
    const winner = st.winner === null || st.winner === undefined ? null : [].concat(st.winner);
    $("stage-winner").hidden = !winner;
    if (winner) {
      $("stage-winner").textContent = (winner.length === 1 ? "Winner: " : `Top ${winner.length}: `) +
        winner.map((id) => itemText.get(id) || id).join(" | ") +
        (st.proven ? "" : ` (among stage 1's top ${m}, which were not proven: taken at the ratings budget)`);
    }
    if (st.stage === 1) {
      $("stage1-text").textContent = `Running: ${count(s1.answers || 0)} ratings so far. Its learner's current ` +
        `top ${m} (not final); stage 1 ends when its learner proves the top ${m}` +
        (budget ? ` or at the ratings budget of ${count(budget)} ratings.` : ".");
    } else if (s1.proven) {
      $("stage1-text").textContent = `Proven: stage 1's learner stopped after ${count(s1.answers)} ratings, ` +
        `certain of these ${m} at error probability ${st.stage_delta}.`;
    } else {
      $("stage1-text").textContent = `Not proven: stage 1 reached its ratings budget of ${count(budget || s1.answers)} ` +
        `ratings before its learner could prove the top ${m}. These are its best ${m} at that point; nothing says ` +
        `they are the true top ${m}.`;
    }
    $("stage1-text").className = st.stage === 1 || s1.proven ? "muted" : "stopping-reason";
    $("stages-section").dataset.proven = st.stage === 1 ? "" : String(Boolean(s1.proven));
    const ol = $("stage1-top");
    ol.textContent = "";
    top.slice(0, STAGE_ROWS).forEach((id) => {
      const li = el("li", "", itemText.get(id) || id);
      li.dataset.id = id;
      li.title = `item id ${id}`;
      ol.appendChild(li);
    });
    $("stage1-more").hidden = top.length <= STAGE_ROWS;
    $("stage1-more").textContent = `… ${count(top.length - STAGE_ROWS)} more.`;
    $("stage2-box").hidden = !s2;
    if (!s2) return;
    $("stage2-link").href = `/dashboard/${s2.experiment_id}`;
    sessionStorage.setItem("pb.token." + s2.experiment_id, token);  // its dashboard opens with the same token
    $("stage2-text").textContent = `Experiment ${s2.experiment_id}: ${count(s2.answers)} comparisons; ` +
      (s2.done ? "its learner has stopped." : "its learner is still comparing.");
    pollStage2(s2);  // not awaited
  }

  // the Borda ranking of stage 2 (its own results) and the Bradley-Terry fit of its comparisons
  async function pollStage2(s2) {
    const key = `${s2.experiment_id}|${s2.answers}|${s2.done}`;
    if (stageBusy || key === stageKey || Date.now() - stageAt < CHARTS_EVERY) return;
    stageBusy = true;
    try {
      const child = await getJson(`/api/experiments/${s2.experiment_id}/results?limit=${STAGE_ROWS}&timeline=false`);
      const r = await fetch(`/api/experiments/${eid}/bradley-terry`, {headers: auth()});
      if (r.status === 401) { rejected(); return; }
      const bt = await r.json().catch(() => ({}));
      stageKey = key; stageAt = Date.now();
      if (child) drawBorda(child);
      drawBradleyTerry(r.ok ? bt : null, typeof bt.detail === "string" ? bt.detail : String(r.status), "s2-");
      ["s2-ranking", "s2-bt-table"].forEach(labelCells);
    } catch (e) { /* the network: the results' poll says so */ } finally { stageBusy = false; }
  }

  // each cell named by its column's heading, for the one-card-per-row layout of narrow screens
  function labelCells(tableId) {
    const heads = [...$(tableId).querySelectorAll("thead th")].map((th) => th.textContent);
    $(tableId).querySelectorAll("tbody tr").forEach((tr) => {
      [...tr.children].forEach((td, i) => { td.dataset.label = heads[i] || ""; });
    });
  }

  function drawBorda(child) {
    const body = $("s2-ranking").querySelector("tbody");
    body.textContent = "";
    const [lo, hi] = [rmin, rmax];
    rmin = 0; rmax = 1;  // a Borda score is a probability: its intervals are drawn on [0, 1]
    try {
      child.ranking.forEach((row) => {
        itemText.set(row.id, row.text);
        const tr = document.createElement("tr");
        if (row.recommended) tr.className = "rec";
        tr.dataset.id = row.id;
        cell(tr, String(row.rank), "rank");
        cell(tr, row.text, "text").title = `item id ${row.id}`;
        cell(tr, fmt(row.mean), "num");
        const [box, title] = intervalCell(row);
        cell(tr, box, "interval").title = title;
        cell(tr, String(row.count), "num");
        body.appendChild(tr);
      });
    } finally { rmin = lo; rmax = hi; }
  }

  // the participants' quality flags, at most every PARTICIPANTS_EVERY ms, with an exclude / include button each
  const PARTICIPANTS_EVERY = 5000;
  let participantsAt = 0;
  const FLAG_NAMES = {fast: "fast", one_label: "one label", gold: "gold", consensus: "consensus"};
  async function pollParticipants(force) {
    if (!force && Date.now() - participantsAt < PARTICIPANTS_EVERY) return;
    participantsAt = Date.now();
    let data = null;
    try { data = await getJson(`/api/experiments/${eid}/participants?limit=100`); } catch (e) { return; }
    if (data === null) return;
    $("participants-summary").textContent = `${data.n_participants} participants, ${data.n_flagged} flagged, ` +
      `${data.n_excluded} excluded, ${data.n_skips} skips` + (data.participants.length < data.n_participants ? " (the first 100 shown)" : "");
    const body = $("participants").querySelector("tbody");
    body.textContent = "";
    data.participants.forEach((p) => {
      const tr = document.createElement("tr");
      tr.dataset.participant = p.participant_id;
      if (p.excluded) tr.classList.add("excluded");
      const cells = [p.participant_id + (p.platform ? ` (${p.platform})` : ""), String(p.answers), String(p.skips),
        fmt(p.median_response_seconds, 1), p.gold_answered ? `${p.gold_wrong} / ${p.gold_answered}` : "–",
        p.consensus_agreement === null ? "–" : `${fmt(p.consensus_agreement, 2)} / ${fmt(p.chance_agreement, 2)}`,
        p.flags.map((f) => FLAG_NAMES[f] || f).join(", ") + (p.excluded ? (p.flags.length ? "; " : "") + "excluded" : "")];
      cells.forEach((text, i) => {
        const td = document.createElement("td");
        td.textContent = text;
        if (i === 0) td.className = "pid";
        if (i === 6) td.className = "flags";
        tr.appendChild(td);
      });
      const td = document.createElement("td");
      const b = document.createElement("button");
      b.type = "button";
      b.className = p.excluded ? "include" : "exclude";
      b.textContent = p.excluded ? "Include" : "Exclude";
      b.addEventListener("click", () => setExcluded(p.participant_id, !p.excluded));
      td.appendChild(b);
      tr.appendChild(td);
      body.appendChild(tr);
    });
  }
  async function setExcluded(pid, exclude) {
    if (exclude && !confirm(`Exclude participant ${pid}? Every learner is rebuilt without their answers.`)) return;
    const r = await send(`/api/experiments/${eid}/exclusions`, {method: "POST",
      headers: {...auth(), "Content-Type": "application/json"},
      body: JSON.stringify({participant_id: pid, excluded: exclude})}, exclude ? "the exclusion" : "the inclusion");
    if (r === null) return;
    if (r.status === 401) { rejected(); return; }
    if (!r.ok) { const d = await r.json().catch(() => ({})); $("error").textContent = d.detail || r.statusText; }
    await pollParticipants(true);
    poll();
  }

  async function poll() {
    clearTimeout(timer);
    if (!token) { askToken("Enter the owner token to open this dashboard."); return; }
    const mine = ++seq;  // a tab switch or a new page starts a new poll: older answers are dropped
    try {
      const params = new URLSearchParams({limit: String(PAGE), offset: String(view.offset), sort: view.sort,
        order: view.order, timeline: "false"});
      if (view.q) params.set("q", view.q);
      if (learner) params.set("algorithm", learner);
      const r = await fetch(`/api/experiments/${eid}/results?${params}`, {headers: auth()});
      if (mine !== seq) return;
      if (r.status === 401) { rejected(); return; }
      if (!r.ok) {
        const d = await r.json().catch(() => ({}));
        $("error").textContent = `results: ${r.status}${d.detail && typeof d.detail === "string" ? " " + d.detail : ""}`;
      } else {
        const res = await r.json();
        if (mine !== seq) return;
        $("error").textContent = "";
        showDashboard(true);
        if (!info) await loadInfo(mine);
        if (mine !== seq) return;
        learners = res.algorithms || [];
        if (learners.length > 1 && !learner) learner = res.algorithm_label;
        drawTabs();
        if (!drawPager(res)) { timer = setTimeout(poll, 0); return; }
        render(res);
        if (charts.made) followNow(res);
        pollCharts(mine, res);  // not awaited: a slow chart fetch does not hold the ranking back
        pollParticipants(false);
        if (res.query === "pairwise") pollBradleyTerry(res);  // not awaited either
        drawStages(res);  // a staged experiment's stages (hidden for any other)
        if (learners.length > 1) await pollComparison(mine);
      }
    } catch (e) { $("error").textContent = "Connection lost, retrying every second…"; }
    if (mine !== seq) return;
    timer = setTimeout(poll, 1000);
  }
  poll();
})();
