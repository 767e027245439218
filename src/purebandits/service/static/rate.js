// Rating page: one item at a time, one button per label (keys 1, 2, 3, ... pick them). A pairwise experiment's
// page is the same page: two items per query, each a big button ("which is funnier?"; Left arrow or 1 picks the
// left one, Right arrow or 2 the right one), answered with the labels "left" and "right" through the same outbox,
// prefetch, states and completion flow; `/public`'s "query" (or an ask's `items`) says which kind it is. The next item
// is fetched while the participant rates the current one (asks with n), so
// no rating waits for the server: a click shows the next item at once and its answer goes out
// behind it, through an outbox kept in localStorage (a reload or a lost connection resends it).
//
// Every text that comes from the server (item text, instructions, messages) is set with
// textContent, never innerHTML, so it is shown, not interpreted.
//
// No answer is lost silently: an answer that fails on a network error, a timeout, a 5xx or a 429
// is sent again for the same query and label (the API counts a repeat once) with exponential
// backoff, at once when the browser comes back online; one that is finally refused or given up
// is counted in a notice that stays on the page. Asks are retried the same way. While the network
// is down the participant goes on with the items already fetched.
//
// The server lists the participant's pending queries first in every ask: so the page drops fetched
// items the server no longer holds (expired or cancelled: their answers would be refused), shows
// again one whose answer was given up while it may still be pending, and counts an answer stored
// before an ask but acknowledged after it once.
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("config").textContent);
  const eid = cfg.experiment_id;
  const $ = (id) => document.getElementById(id);

  const ANON_KEY = "purebandits.participant";            // anonymous id, shared by experiments
  const WORKER_KEY = "purebandits.participant.e" + eid;  // crowd-work id from ?participant=, per experiment
  const BACKOFF_MIN_MS = 500;
  const BACKOFF_MAX_MS = 8000;
  const tuning = window.__purebanditsRate || {};  // tests shorten the give-up time
  const ANSWER_GIVE_UP_MS = tuning.answerGiveUpMs || 120000;  // an answer still failing after this is reported lost
  const REQUEST_TIMEOUT_MS = 30000;  // a request hanging this long counts as a network error
  const ARM_MS = 250;                // a new item's buttons ignore clicks this long (double clicks)
  const EXHAUSTED_POLL_S = 30;
  const MAX_KEYS = 9;
  // one item held ahead of the one on screen: enough that no rating waits for a round trip, few
  // enough that the items a leaving participant holds cost the learner little (benchmarks/open_crowd.py:
  // five per ask cost the default learner 14-17 % more answers to stop on contest 512)
  const BATCH = tuning.batch || 1;        // new items per ask
  const MAX_N = 10;                       // the API's bound on n
  const LOW_WATER = tuning.lowWater || 1; // fetch more when fewer items than this wait after the one on screen

  // crowd platforms: Prolific passes PROLIFIC_PID, STUDY_ID and SESSION_ID; Mechanical Turk's ExternalQuestion
  // passes workerId, assignmentId, hitId and turkSubmitTo (assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE while a
  // worker previews the HIT: the page shows an example and records nothing); other links pass ?participant=
  const params = new URLSearchParams(location.search);
  const param = (name) => (params.get(name) || "").trim() || null;
  const MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE";
  const SKIP = "skip";
  const platform = param("PROLIFIC_PID") ? {name: "prolific", study: param("STUDY_ID"), session: param("SESSION_ID")}
    : param("assignmentId") ? {name: "mturk", study: param("hitId"), session: param("assignmentId"),
                               submitTo: param("turkSubmitTo")}
    : null;
  const preview = !!platform && platform.name === "mturk" && platform.session === MTURK_PREVIEW;
  const urlWorker = param("PROLIFIC_PID") || param("workerId") || param("participant");
  let allowSkip = false;
  let pairwise = false;  // two items per query (the experiment's "query" is "pairwise"), answered left or right
  let question = "Which is funnier?";  // a pairwise page's question: the experiment's instructions when it has them
  let participant = null;
  let labels = [];
  let current = null;  // the query on screen, until it is answered
  let armed = false;   // its buttons take clicks (ARM_MS after it appeared)
  let queue = [];      // fetched queries not shown yet, in the server's order
  const known = new Set();  // every query id this page has held (a refill re-sends the pending ones)
  let outbox = [];     // answers not acknowledged yet: {query_id, label}, sent in order
  let sending = false; // the outbox loop runs
  let refilling = null;  // the ask in flight, if any
  const acked = new Set();  // query ids whose answers the server acknowledged to this page
  // a staged experiment: the experiment (stage) the last listed queries came from, the answers before it, and the
  // queries of the stage before still held at the switch
  let stageEid = null, stageBase = 0, carried = new Set();
  let counted = {n: 0, listed: null};  // the last ask's n_answered and the query ids it listed (unanswered then)
  const forgotten = new Set();  // query ids whose answers were given up while the server may hold them pending
  let lost = 0;
  let askGen = 0;      // a newer ask makes an older retry loop stop
  let pollTimer = null;
  let forbidden = 0;   // asks refused with 403 in a row (unknown participant id)
  const wakers = new Set();
  let onlineEpoch = 0;  // counts `online` events: backoff starts over after each

  // ---------------------------------------------------------------- small helpers
  function storageGet(key) { try { return localStorage.getItem(key); } catch (e) { return null; } }
  function storageSet(key, value) { try { localStorage.setItem(key, value); } catch (e) { /* private mode */ } }

  // the status line; `net` marks a note about the connection, which a new item does not clear
  function message(text, kind, net) {
    const m = $("message");
    m.textContent = text || "";
    m.className = "message" + (kind ? " " + kind : "");
    if (net) m.dataset.net = "1"; else delete m.dataset.net;
  }

  // a wait that the `online` event cuts short
  function sleep(ms) {
    return new Promise((resolve) => {
      const wake = () => { clearTimeout(timer); wakers.delete(wake); resolve(); };
      const timer = setTimeout(wake, ms);
      wakers.add(wake);
    });
  }

  window.addEventListener("online", () => {
    onlineEpoch += 1;
    Array.from(wakers).forEach((wake) => wake());
    if ($("message").dataset.offline) { delete $("message").dataset.offline; message(""); }
  });
  window.addEventListener("offline", () => {
    if (!$("message").textContent) {
      message("You are offline: your answers will be sent when the connection is back.", "warn", true);
      $("message").dataset.offline = "1";
    }
  });

  // 0.5 s doubling up to 8 s, each wait drawn in [d/2, d] so that many pages do not retry in step
  function backoff(attempt) {
    const d = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * Math.pow(2, attempt));
    return d / 2 + Math.random() * d / 2;
  }

  // one request: {status, data, retryAfter}; throws on a network error or a timeout
  async function request(url, body) {
    const ctl = typeof AbortController === "function" ? new AbortController() : null;
    const timer = ctl ? setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS) : null;
    try {
      const init = {method: body === undefined ? "GET" : "POST", cache: "no-store", signal: ctl ? ctl.signal : undefined};
      if (body !== undefined && body !== null) {
        init.headers = {"Content-Type": "application/json"};
        init.body = JSON.stringify(body);
      }
      const r = await fetch(url, init);
      let data = null;
      try { data = await r.json(); } catch (e) { data = null; }
      const ra = Number(r.headers.get("Retry-After"));
      return {status: r.status, data: data, retryAfter: Number.isFinite(ra) && ra > 0 ? ra : 0};
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  function retryable(r) { return r === null || r.status === 429 || r.status >= 500; }

  // `request` until a response worth acting on: network errors, timeouts, 429 and 5xx are retried
  // with backoff (at least Retry-After). opts.giveUpMs: return the last failure (status 0 for a
  // network error) after that long; opts.stale(): return null once the caller lost interest.
  async function send(url, body, opts) {
    opts = opts || {};
    const deadline = opts.giveUpMs ? Date.now() + opts.giveUpMs : Infinity;
    let epoch = onlineEpoch;
    let failed = false;
    for (let attempt = 0; ; attempt++) {
      let r = null;
      try { r = await request(url, body); } catch (e) { r = null; }
      if (opts.stale && opts.stale()) return null;
      if (!retryable(r)) {
        if (failed) message("");
        return r;
      }
      if (Date.now() >= deadline) return r || {status: 0, data: null, retryAfter: 0};
      failed = true;
      delete $("message").dataset.offline;
      message(r === null ? "Connection lost, retrying…" : "The server is busy, retrying…", "warn", true);
      // just back online (the network may need a moment more): short waits again
      if (epoch !== onlineEpoch) { epoch = onlineEpoch; attempt = 0; }
      let wait = backoff(attempt);
      if (r && r.retryAfter) wait = Math.max(wait, Math.min(1000 * r.retryAfter, 30000));
      await sleep(Math.max(0, Math.min(wait, deadline - Date.now())));
      if (opts.stale && opts.stale()) return null;
    }
  }

  function detail(r) { return (r && r.data && typeof r.data.detail === "string") ? r.data.detail : ""; }

  // ---------------------------------------------------------------- participant id
  function setParticipant(pid) {
    participant = pid;
    $("participant-id").textContent = pid;
  }

  async function registerAnonymous(force) {
    let pid = force ? null : storageGet(ANON_KEY);
    if (!pid) {
      const r = await send("/api/participants", null);
      if (r.status !== 201 || !r.data || !r.data.participant_id) {
        throw new Error(detail(r) || "could not get a participant id (" + r.status + ")");
      }
      pid = r.data.participant_id;
      storageSet(ANON_KEY, pid);
    }
    setParticipant(pid);
  }

  // the link's ?participant= id (registered, idempotent), else the one this experiment remembers,
  // else an anonymous id; `force` registers again (after a 403: the server does not know the id)
  async function register(force) {
    const worker = urlWorker || storageGet(WORKER_KEY);
    if (worker) {
      if (!urlWorker && !force) { setParticipant(worker); return; }
      const body = {participant_id: worker};
      if (urlWorker && platform && platform.session) {
        Object.assign(body, {experiment_id: Number(eid), platform: platform.name, session: platform.session});
        if (platform.study) body.study = platform.study;
      }
      const r = await send("/api/participants", body);
      if ((r.status === 201 || r.status === 200) && r.data && r.data.participant_id) {
        storageSet(WORKER_KEY, r.data.participant_id);
        setParticipant(r.data.participant_id);
        return;
      }
      // say why the link's id is not used (the answers cannot be credited to it)
      const note = $("id-note") || document.createElement("p");
      note.id = "id-note";
      note.className = "notice error";
      note.textContent = "The participant id in this link was not accepted (" + (detail(r) || r.status) +
        "); an anonymous id is used instead.";
      $("lost").after(note);
    }
    await registerAnonymous(force);
  }

  // ---------------------------------------------------------------- buttons and keys
  function buildButtons(names) {
    const box = $("buttons");
    const kind = pairwise ? "pair" : "rating";
    if (JSON.stringify(names) === JSON.stringify(labels) && box.children.length && box.dataset.kind === kind) return;
    labels = names.slice();
    box.textContent = "";
    box.dataset.kind = kind;
    box.classList.toggle("pair", pairwise);
    if (pairwise) {
      buildPairButtons();
    } else labels.forEach((label, i) => {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "label";
      b.dataset.label = label;
      if (i < MAX_KEYS) {
        const key = document.createElement("span");
        key.className = "key";
        key.setAttribute("aria-hidden", "true");
        key.textContent = String(i + 1);
        b.appendChild(key);
        b.setAttribute("aria-keyshortcuts", String(i + 1));
      }
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = label;
      b.appendChild(name);
      b.disabled = true;
      b.addEventListener("click", () => pick(label));
      box.appendChild(b);
    });
    box.dataset.labels = JSON.stringify(labels);
    if (allowSkip) addSkipButton();
    const n = Math.min(labels.length, MAX_KEYS);
    $("keys-last").textContent = String(n);
    $("keys-hint").hidden = n < 2;
  }

  // a pairwise query's two buttons, left and right (labels[0] and labels[1]): each is a whole item, its picture and
  // text filled in by show(); its key badge says which keys pick it
  function buildPairButtons() {
    const box = $("buttons");
    box.setAttribute("aria-label", question);
    [["← 1", "ArrowLeft 1"], ["2 →", "ArrowRight 2"]].forEach(([keys, shortcut], i) => {
      const label = labels[i];
      if (label === undefined) return;
      const b = document.createElement("button");
      b.type = "button";
      b.className = "label side";
      b.dataset.label = label;
      b.setAttribute("aria-keyshortcuts", shortcut);
      const key = document.createElement("span");
      key.className = "key";
      key.setAttribute("aria-hidden", "true");
      key.textContent = keys;
      const img = document.createElement("img");
      img.alt = "";
      img.hidden = true;
      const name = document.createElement("span");
      name.className = "name";
      b.append(key, img, name);
      b.disabled = true;
      b.addEventListener("click", () => pick(label));
      box.appendChild(b);
    });
  }

  // the page becomes a pairwise page: its question over the two items (in place of the instructions), its keys,
  // "answered" for "rated"
  function setPairwise(on, instructions) {
    if (typeof instructions === "string" && instructions.trim()) question = instructions.trim();
    if (on === pairwise && !instructions) return;
    pairwise = on;
    document.querySelector("main").classList.toggle("pairwise", on);
    $("question").textContent = question;
    $("question").hidden = !on;
    if (on) $("instructions").hidden = true;
    $("keys-rating").hidden = on;
    $("keys-pair").hidden = !on;
    $("n-rated-label").textContent = on ? "answered" : "rated";
    $("buttons").setAttribute("aria-label", on ? question : "Your rating");
  }

  // the comparisons' question of an experiment whose asks turned pairwise mid-session (ratings then comparisons)
  async function loadQuestion() {
    const r = await send(`/api/experiments/${eid}/public`);
    if (r.status === 200 && r.data && r.data.query === "pairwise" && pairwise) setPairwise(true, r.data.instructions);
  }

  // "can't decide": recorded, never told to the learner as a rating (key S)
  function addSkipButton() {
    const box = $("buttons");
    if (box.querySelector("button.skip")) return;
    const b = document.createElement("button");
    b.type = "button";
    b.className = "skip";
    b.dataset.label = SKIP;
    b.setAttribute("aria-keyshortcuts", "S");
    b.textContent = "Skip: I can't decide";
    b.disabled = true;
    b.addEventListener("click", () => pick(SKIP));
    box.appendChild(b);
    $("skip-hint").hidden = false;
  }

  function setButtons(enabled, opts) {
    opts = opts || {};
    const box = $("buttons");
    box.hidden = !!opts.hide;
    box.classList.toggle("arming", !!opts.arming);
    box.querySelectorAll("button").forEach((b) => {
      b.disabled = !enabled;
      if (!opts.keepChosen) b.classList.remove("chosen");
    });
  }

  function blurButtons() {
    const a = document.activeElement;
    if (a && a !== document.body && typeof a.blur === "function" && $("buttons").contains(a)) a.blur();
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (allowSkip && (ev.key === "s" || ev.key === "S")) {
      const t = ev.target;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
      ev.preventDefault();
      if (!ev.repeat) pick(SKIP);
      return;
    }
    // a pairwise page: Left and Right arrows pick the left and the right item (as 1 and 2 do)
    if (pairwise && (ev.key === "ArrowLeft" || ev.key === "ArrowRight")) {
      const t = ev.target;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
      ev.preventDefault();  // no scrolling sideways
      if (!ev.repeat && labels.length === 2) pick(labels[ev.key === "ArrowLeft" ? 0 : 1]);
      return;
    }
    // the digit key itself, also where it needs Shift (AZERTY) or is on the numeric keypad
    const m = /^[1-9]$/.test(ev.key) ? [ev.key, ev.key] : /^(?:Digit|Numpad)([1-9])$/.exec(ev.code || "");
    if (!m) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    const n = Number(m[1]);
    if (n > labels.length) return;
    ev.preventDefault();
    if (ev.repeat) return;  // a held key answers once
    pick(labels[n - 1]);
  });

  // ---------------------------------------------------------------- answers
  function showLost(reason) {
    const el = $("lost");
    lost += 1;
    el.textContent = lost === 1 ? "1 answer could not be saved" : lost + " answers could not be saved";
    if (reason) el.textContent += " (the last one: " + reason + ")";
    el.textContent += ".";
    el.hidden = false;
  }

  function lostReason(r) {
    switch (r.status) {
      case 0: return "the connection was lost";
      case 410: return "the item had expired";
      case 409: return detail(r) || "it conflicts with an earlier answer";
      case 403: return "it belongs to another participant id";
      case 404: return "the item is no longer known";
      default: return (r.status >= 500 || r.status === 429) ? "the server was unavailable" : (detail(r) || "error " + r.status);
    }
  }

  // the participant's stored answers: the count of the last ask plus the answers acknowledged that it did not
  // include (those it still listed as unanswered). Adding every acknowledgement to the count instead would count
  // twice an answer stored before an ask whose acknowledgement arrives after the ask's response.
  function showRated() {
    let n = counted.n;
    acked.forEach((qid) => { if (!counted.listed || counted.listed.has(qid) || carried.has(qid)) n += 1; });
    $("n-rated").textContent = String(n);
  }

  function outboxKey() { return "purebandits.outbox.e" + eid + "." + participant; }
  function saveOutbox() { storageSet(outboxKey(), JSON.stringify(outbox)); }
  function loadOutbox() {
    try {
      const saved = JSON.parse(storageGet(outboxKey()) || "[]");
      if (Array.isArray(saved)) outbox = saved.filter((a) => a && typeof a.query_id === "string" && typeof a.label === "string");
    } catch (e) { outbox = []; }
    outbox.forEach((a) => known.add(a.query_id));
    pending();
    flush();
  }

  // what the participant has rated but the server has not acknowledged yet
  function pending() {
    const el = $("unsent");
    if (!el) return;
    el.textContent = outbox.length ? (outbox.length === 1 ? "1 answer" : outbox.length + " answers") + " waiting to be sent" : "";
    el.hidden = !outbox.length;
  }

  function pick(label) {
    if (!current || !armed || (labels.indexOf(label) < 0 && !(allowSkip && label === SKIP))) return;
    const q = current;
    current = null;
    blurButtons();
    setButtons(false);
    const b = $("buttons").querySelector(`button[data-label="${CSS.escape(label)}"]`);
    if (b) b.classList.add("chosen");
    outbox.push({query_id: q.query_id, label: label});
    saveOutbox();
    pending();
    flush();
    showNext();
  }

  // send the outbox's answers one after another, each until it is acknowledged or finally refused
  async function flush() {
    if (sending) return;
    sending = true;
    let refused = false;
    try {
      while (outbox.length) {
        const a = outbox[0];
        const r = await send(`/api/queries/${encodeURIComponent(a.query_id)}/answer`,
                             {participant_id: participant, label: a.label}, {giveUpMs: ANSWER_GIVE_UP_MS});
        outbox.shift();
        saveOutbox();
        pending();
        if (r.status === 200) {
          acked.add(a.query_id);
          showRated();
        } else {
          message("");
          showLost(lostReason(r));
          // given up on a network error, a 5xx or a 429: the server may still hold the query pending and
          // hand it out again; then it is shown again (else it would hold an item slot until it expires)
          if (r.status === 0 || retryable(r)) {
            known.delete(a.query_id);
            forgotten.add(a.query_id);
          }
          refused = true;
        }
      }
    } finally {
      sending = false;
    }
    // the last answers may complete the session; a refused one (often an expired query) means that items
    // fetched with it may be gone too: ask, which drops those the server no longer holds
    if ((!current && !queue.length) || refused) run(refill());
  }

  // ---------------------------------------------------------------- items and states
  function show(q) {
    current = q;
    const card = $("card");
    card.dataset.queryId = q.query_id;
    card.dataset.shown = String(Number(card.dataset.shown || 0) + 1);  // items shown so far (a repeat counts)
    card.classList.remove("state");
    card.hidden = false;
    $("complete").hidden = true;
    document.querySelector("main").classList.remove("idle");
    const pair = Array.isArray(q.items);
    if (pair !== pairwise) {  // the ask's shape decides (the context may not have loaded)
      setPairwise(pair);
      if (pair) loadQuestion();  // a staged experiment has moved to comparisons: their question, if it has one
    }
    card.classList.toggle("paired", pair);  // a pair's items are its buttons: the card only says what is going on
    if (Array.isArray(q.labels)) buildButtons(q.labels);
    if (pair) {
      $("item-text").textContent = "";
      $("buttons").querySelectorAll("button.side").forEach((b, i) => fillSide(b, q.items[i]));
    } else {
      $("item-text").textContent = q.item.text;
      setImage($("item-image"), q.item.image_url);
    }
    blurButtons();
    armed = false;
    setButtons(false, {arming: true});
    setTimeout(() => {
      if (current !== q) return;
      armed = true;
      setButtons(true);
    }, ARM_MS);
  }

  function setImage(img, url) {
    if (url) {
      img.src = url;
      img.hidden = false;
    } else {
      img.hidden = true;
      img.removeAttribute("src");
    }
  }

  // one side of a pair: the item's text (and picture), its id for the record (tests read it too)
  function fillSide(b, item) {
    item = item || {text: ""};
    b.querySelector(".name").textContent = item.text;
    if (item.id !== undefined) b.dataset.itemId = String(item.id); else delete b.dataset.itemId;
    setImage(b.querySelector("img"), item.image_url);
  }

  // no item to show: `text` says why; opts.idle (no item for a while, or for good) hides the buttons
  // and the task's instructions and picture
  function showState(text, opts) {
    opts = opts || {};
    current = null;
    const card = $("card");
    delete card.dataset.queryId;
    card.classList.add("state");
    card.classList.remove("paired");
    $("item-text").textContent = text;
    const img = $("item-image");
    img.hidden = true;
    img.removeAttribute("src");
    document.querySelector("main").classList.toggle("idle", !!opts.idle);
    // a pairwise page's buttons are the last pair's captions: hidden while no pair is shown, not left dimmed
    setButtons(false, {hide: !!opts.idle || pairwise});
  }

  // the end of a session: the completion code, and the way back to the crowd platform -- MTurk: a form POST of
  // the assignment to turkSubmitTo/mturk/externalSubmit (only to a submit origin the server allows); Prolific or
  // another platform: the experiment's completion URL (with the code), to which the page goes by itself
  function showComplete(code, url, text) {
    showState(text || (pairwise ? "Thank you! You have answered all the comparisons we asked of you."
                                : "Thank you! You have rated all the items we asked of you."), {idle: true});
    if (!code) return;
    $("completion-code").textContent = code;
    $("complete").hidden = false;
    $("card").hidden = true;
    if (platform && platform.name === "mturk" && platform.submitTo && !preview) {
      let target = null;
      try { target = new URL(platform.submitTo); } catch (e) { target = null; }
      if (target && (cfg.submit_origins || []).indexOf(target.origin) >= 0) {
        const form = $("mturk-form");
        form.action = target.origin + target.pathname.replace(/\/+$/, "") + "/mturk/externalSubmit";
        $("mturk-assignment").value = platform.session;
        $("mturk-code").value = code;
        form.hidden = false;
        if (!submitted) { submitted = true; form.submit(); }
        return;
      }
      message("This page cannot send your work to " + platform.submitTo + "; please copy the code.", "warn");
      return;
    }
    if (typeof url === "string" && /^https?:\/\//.test(url)) {
      $("continue-link").href = url;
      $("continue").hidden = false;
      if (!submitted) { submitted = true; setTimeout(() => location.assign(url), 1500); }
    }
  }
  let submitted = false;

  function schedule(seconds) {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(() => run(refill()), 1000 * seconds);
  }

  function run(promise) {
    promise.catch((e) => {
      message("Something went wrong (" + (e && e.message ? e.message : e) + "), retrying…", "warn");
      schedule(10);
    });
  }

  // the next fetched item at once if there is one (and fetch more when few are left), else wait for an ask
  function showNext() {
    if (current) return;
    const q = queue.shift();
    if (q) {
      if (!$("message").dataset.net) message("");
      show(q);
      if (queue.length < LOW_WATER) run(refill());
      return;
    }
    if (!$("card").classList.contains("state")) showState("Loading…");
    run(refill());
  }

  // one ask at a time: its new queries join the queue (the pending ones it sends again are known already)
  function refill() {
    if (!refilling) {
      refilling = askMore().finally(() => { refilling = null; });
    }
    return refilling;
  }

  async function askMore() {
    const gen = ++askGen;
    clearTimeout(pollTimer);
    pollTimer = null;
    const outstanding = (current ? 1 : 0) + queue.length + outbox.length;
    const n = Math.min(MAX_N, BATCH + outstanding);
    const r = await send(`/api/experiments/${eid}/queries`, {participant_id: participant, n: n},
                         {stale: () => gen !== askGen});
    if (r === null) return;
    if (r.status === 403) {
      forbidden += 1;
      if (forbidden > 3) {
        message(detail(r) || "This participant id is not accepted.", "warn");
        return schedule(30);
      }
      await register(true);
      return askMore();
    }
    forbidden = 0;
    if (r.status === 404) {
      if (!current && !queue.length) showState(detail(r) || "There is no such experiment.", {idle: true});
      return;
    }
    if (r.status !== 200 || !r.data) {
      message(detail(r) || "Something went wrong (" + r.status + "), retrying…", "warn");
      return schedule(10);
    }
    const q = r.data;
    const listed = q.state !== "ok" ? [] : (Array.isArray(q.queries) ? q.queries : [q])
      .filter((x) => x && typeof x.query_id === "string");
    if (typeof q.n_answered === "number") {
      // a staged experiment's asks come from its stage 2 after the switch, which counts its own answers: the
      // answers of the stage before stay in the count
      const stage = listed.length ? listed[0].experiment_id : stageEid;
      if (stageEid !== null && stage !== stageEid) {
        stageBase = Number($("n-rated").textContent) || 0;
        // the queries of the stage before still held here count once answered (the new stage does not list them)
        carried = new Set([current, ...queue].filter((x) => x && x.experiment_id !== stage).map((x) => x.query_id));
      }
      stageEid = stage;
      counted = {n: stageBase + q.n_answered, listed: new Set(listed.map((x) => x.query_id))};
      showRated();
    }
    const later = (fallback) => schedule(q.retry_after > 0 ? q.retry_after : fallback);
    if (q.state === "ok") {
      // the participant's pending queries come first, then new ones: a new one means that every query the
      // server still holds pending for this participant is listed, so a fetched one it does not list has
      // expired (or was cancelled) and an answer to it would be refused: drop it, even the one on screen
      const fresh = listed.filter((x) => !known.has(x.query_id));
      if (fresh.some((x) => !forgotten.has(x.query_id))) {
        const live = new Set(listed.map((x) => x.query_id));
        // only for the stage that listed them: a query a staged experiment's stage 1 issued before the switch to
        // comparisons is not listed by stage 2's asks, and is still answered (and stored)
        const stages = new Set(listed.map((x) => x.experiment_id));
        const kept = (x) => live.has(x.query_id) || !stages.has(x.experiment_id);
        queue = queue.filter(kept);
        if (current && !kept(current)) {
          current = null;
          showState("Loading…");
        }
      }
      fresh.forEach((x) => { known.add(x.query_id); forgotten.delete(x.query_id); queue.push(x); });
      if (!current) {
        if (queue.length) return showNext();
        return later(1);  // only answers on their way are pending: ask again once they are in
      }
      return;
    }
    if (current || queue.length) return;  // go on with the items already here
    if (outbox.length) return later(1);    // the answers on their way decide what comes next
    switch (q.state) {
      case "waiting":
        showState("Waiting for other answers…");
        return later(2);
      case "paused":
        showState("This experiment is paused. Please come back later.", {idle: true});
        return later(10);
      case "exhausted":
        showState(pairwise ? "Thank you! You have compared every pair we need from you right now."
                           : "Thank you! You have rated every item we need from you right now.", {idle: true});
        message("This page checks for new items every " + EXHAUSTED_POLL_S + " seconds.");
        return schedule(EXHAUSTED_POLL_S);
      case "complete":
        message("");
        return showComplete(q.completion_code, q.completion_url);
      case "excluded":
        message("");
        return showState("Thank you! There are no more items for you in this study.", {idle: true});
      case "done":
        message("");
        if (q.study_complete && q.completion_code) {
          return showComplete(q.completion_code, q.completion_url,
                              "This study is complete: it has found its answer. Thank you for your " +
                              (pairwise ? "answers!" : "ratings!"));
        }
        if (q.study_complete) {
          return showState("This study is complete: it has found its answer and needs no more answers. Thank you!",
                           {idle: true});
        }
        return showState("This experiment has found its answer. Thank you!", {idle: true});
      case "stopped":
      case "archived":
        message("");
        return showState("This experiment has ended. Thank you!", {idle: true});
      default:
        showState(String(q.state));
        return later(10);
    }
  }

  // a page that closes gives back the items it holds but will not rate (the one fetched ahead, the one on
  // screen), so the learner stops counting them as out now rather than when they expire; answers waiting
  // in the outbox are not given back (they go out when the page comes back)
  window.addEventListener("pagehide", () => {
    if (!participant || typeof navigator.sendBeacon !== "function") return;
    const held = current ? [current, ...queue] : queue.slice();
    const body = JSON.stringify({participant_id: participant});
    held.forEach((q) => {
      navigator.sendBeacon(`/api/queries/${encodeURIComponent(q.query_id)}/release`,
                           new Blob([body], {type: "application/json"}));
    });
  });
  // back from the browser's page cache: what it held was given back, so fetch anew
  window.addEventListener("pageshow", (ev) => {
    if (!ev.persisted) return;
    queue = [];
    current = null;
    showNext();
  });

  // ---------------------------------------------------------------- context and start
  async function loadContext() {
    const r = await send(`/api/experiments/${eid}/public`);
    if (r.status !== 200 || !r.data) return;  // the ask says what is wrong
    const p = r.data;
    if (typeof p.name === "string" && p.name) {  // the page may have come without it (a database that hung)
      $("title").textContent = p.name;
      document.title = "Rate: " + p.name;
    }
    if (p.query === "pairwise") {
      setPairwise(true, p.instructions);  // the instructions become the question over the two items
    } else if (typeof p.instructions === "string" && p.instructions.trim()) {
      $("instructions").textContent = p.instructions;
      $("instructions").hidden = false;
    }
    if (typeof p.image_url === "string" && p.image_url) {
      const img = $("context-image");
      img.addEventListener("error", () => { $("context").hidden = true; }, {once: true});
      img.src = p.image_url;
      $("context").hidden = false;
    }
    if (Number.isInteger(p.answers_per_participant) && p.answers_per_participant > 0) {
      $("n-target").textContent = " of " + p.answers_per_participant;
    }
    allowSkip = p.allow_skip === true;
    if (Array.isArray(p.labels) && p.labels.length && !labels.length) buildButtons(p.labels);
    if (allowSkip) addSkipButton();
    return p;
  }

  // MTurk's preview: the task as the worker will see it, with an example item, recording nothing
  async function showPreview() {
    const p = await loadContext();
    $("preview").hidden = false;
    $("participant-id").textContent = "(preview)";
    const example = p && typeof p.example === "string" ? p.example : "An item to rate appears here.";
    $("card").classList.remove("state");
    $("item-text").textContent = example;
    if (pairwise) {  // two sample sides: the worker sees how a comparison is answered
      $("item-text").textContent = "Two items appear here; you pick the better one.";
      $("buttons").querySelectorAll("button.side").forEach((b, i) => fillSide(b, {text: i ? "The other item" : example}));
    }
    setButtons(false);
  }

  $("copy-code").addEventListener("click", () => {
    const code = $("completion-code").textContent;
    const done = (ok) => {
      const sel = window.getSelection();
      const range = document.createRange();
      range.selectNodeContents($("completion-code"));
      sel.removeAllRanges();
      sel.addRange(range);
      if (!ok) {
        try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      }
      $("copy-status").textContent = ok ? "Copied." : "Select the code and copy it.";
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(code).then(() => done(true), () => done(false));
    } else {
      done(false);
    }
  });

  if (preview) {
    run(showPreview());
  } else {
    run(Promise.all([loadContext(), register(false)]).then(() => { loadOutbox(); return refill(); }));
  }
})();
