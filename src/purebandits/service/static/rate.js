// Rating page: one item at a time, one button per label, next item after each answer.
// Item text is set with textContent (never innerHTML), so it is shown, not interpreted.
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("config").textContent);
  const eid = cfg.experiment_id;
  const $ = (id) => document.getElementById(id);
  const KEY = "purebandits.participant";
  let participant = null;
  let current = null;
  let rated = 0;

  async function post(url, body) {
    const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                                body: JSON.stringify(body || {})});
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    return {status: r.status, data: data, retry: Number(r.headers.get("Retry-After") || 1)};
  }

  async function ensureParticipant(force) {
    participant = force ? null : localStorage.getItem(KEY);
    if (!participant) {
      const r = await post("/api/participants");
      if (r.status !== 201) throw new Error("could not register");
      participant = r.data.participant_id;
      localStorage.setItem(KEY, participant);
    }
  }

  function message(text) { $("message").textContent = text || ""; }

  function setButtons(labels, enabled) {
    const box = $("buttons");
    if (box.dataset.labels !== JSON.stringify(labels)) {
      box.textContent = "";
      labels.forEach((label) => {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "label";
        b.dataset.label = label;
        b.textContent = label;
        b.addEventListener("click", () => answer(label));
        box.appendChild(b);
      });
      box.dataset.labels = JSON.stringify(labels);
    }
    box.querySelectorAll("button").forEach((b) => { b.disabled = !enabled; });
  }

  function show(q) {
    current = q;
    $("item-text").textContent = q.item.text;
    const img = $("item-image");
    if (q.item.image_url) { img.src = q.item.image_url; img.hidden = false; } else { img.hidden = true; img.removeAttribute("src"); }
    $("card").dataset.queryId = q.query_id;
    setButtons(q.labels, true);
    message("");
  }

  async function next() {
    current = null;
    setButtons(JSON.parse($("buttons").dataset.labels || "[]"), false);
    const r = await post(`/api/experiments/${eid}/queries`, {participant_id: participant});
    if (r.status === 403) { await ensureParticipant(true); return next(); }
    if (r.status === 429 || r.status === 503) { message("Busy, retrying…"); return setTimeout(next, 1000 * r.retry); }
    if (r.status !== 200) { message((r.data && r.data.detail) || "Something went wrong."); return setTimeout(next, 3000); }
    const q = r.data;
    if (q.state === "ok") return show(q);
    const why = {waiting: "Waiting for other answers…", done: "This experiment has found its answer. Thank you!",
                 paused: "This experiment is paused.", stopped: "This experiment has ended. Thank you!"}[q.state];
    $("item-text").textContent = why || q.state;
    message("");
    if (q.state !== "stopped") setTimeout(next, 1000 * (q.retry_after || 2));
  }

  async function answer(label) {
    if (!current) return;
    const q = current;
    current = null;
    setButtons(q.labels, false);
    const r = await post(`/api/queries/${encodeURIComponent(q.query_id)}/answer`, {participant_id: participant, label: label});
    if (r.status === 200) {
      rated += 1;
      $("n-rated").textContent = String(rated);
    } else if (r.status === 503) {
      current = q; setButtons(q.labels, true); message("Server busy, please try again."); return;
    } else if (r.status !== 410) {
      message((r.data && r.data.detail) || "Could not save the answer.");
    }
    next();
  }

  ensureParticipant(false).then(next).catch((e) => message(String(e)));
})();
