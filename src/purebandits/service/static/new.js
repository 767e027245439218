// New-experiment form: sends the items file's bytes (base64: the server reads them as UTF-8, and refuses
// another encoding by line, as the CLI does) and the context image as base64 (FileReader), builds the JSON
// body of POST /api/experiments and shows the owner token once, with the number of items created.
// The admin token is asked for before anything is uploaded when the server has one (the page says so),
// else when the server answers 401; it stays in sessionStorage.
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("config").textContent);
  const $ = (id) => document.getElementById(id);
  const ADMIN_KEY = "purebandits.admin_token";
  const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  const MAX_IMAGE_BYTES = 2 * 1024 * 1024;
  const LABEL_RE = /^[A-Za-z0-9_.-]{1,40}$/;

  // ------------------------------------------------------------------ rows
  function addLabel(name, reward) {
    const row = $("label-row").content.firstElementChild.cloneNode(true);
    row.querySelector(".label-name").value = name;
    row.querySelector(".label-reward").value = reward;
    row.querySelector(".remove").addEventListener("click", () => {
      if ($("labels").children.length > 2) row.remove();
      else showError("An experiment needs at least two labels.");
    });
    $("labels").appendChild(row);
    return row;
  }

  function learnerRows() { return Array.from($("learners").querySelectorAll(".learner-row")); }

  // shares the user has not typed are kept equal (100, 50/50, 33.3/33.3/33.3 ...)
  function rebalance() {
    const rows = learnerRows();
    const shares = rows.map((r) => r.querySelector(".learner-share"));
    if (shares.every((s) => s.dataset.auto === "1")) {
      const each = Math.round(1000 / rows.length) / 10;
      shares.forEach((s) => { s.value = String(each); });
    }
    rows.forEach((r) => { r.querySelector(".remove").disabled = rows.length === 1; });
  }

  function hint(row) {
    const opt = row.querySelector(".learner-algorithm").selectedOptions[0];
    const text = opt ? `${opt.dataset.paper || ""}${opt.dataset.params ? ` · parameters: ${opt.dataset.params}` : ""}` : "";
    row.querySelector(".learner-hint").textContent = text;
  }

  function addLearner(algorithm) {
    const row = $("learner-row").content.firstElementChild.cloneNode(true);
    const sel = row.querySelector(".learner-algorithm");
    if (algorithm) sel.value = algorithm;
    sel.addEventListener("change", () => hint(row));
    const share = row.querySelector(".learner-share");
    share.dataset.auto = "1";
    share.addEventListener("input", () => { share.dataset.auto = "0"; });
    row.querySelector(".remove").addEventListener("click", () => {
      if (learnerRows().length > 1) { row.remove(); rebalance(); }
    });
    $("learners").appendChild(row);
    hint(row);
    rebalance();
    return row;
  }

  cfg.labels.forEach((l) => addLabel(l.name, l.reward));
  addLearner();
  $("add-label").addEventListener("click", () => addLabel("", "").querySelector(".label-name").focus());
  // a second learner is most often the non-adaptive baseline, as in NEXT's caption contests
  const BASELINE = $("learner-row").content.querySelector("option[value='random_sampling']") ? "random_sampling" : null;
  $("add-learner").addEventListener("click", () => addLearner(BASELINE).querySelector(".learner-algorithm").focus());

  // ------------------------------------------------------------------ files
  function readFile(file, how) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(new Error(`could not read ${file.name}`));
      if (how === "bytes") reader.readAsArrayBuffer(file); else reader.readAsDataURL(file);
    });
  }

  function kb(n) { return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} kB` : `${(n / 1024 / 1024).toFixed(2)} MB`; }

  // rows of CSV text: line breaks inside double quotes (a caption's own) do not end a row
  function csvRows(text) {
    let rows = 0, quoted = false, blank = true;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (c === '"') quoted = !quoted;
      if (c === "\n" && !quoted) { if (!blank) rows++; blank = true; } else if (c !== "\r") blank = false;
    }
    return rows + (blank ? 0 : 1);
  }

  // a quick look at the header, the number of rows and the encoding; the server reads the file properly
  $("items-file").addEventListener("change", async () => {
    const info = $("items-info");
    info.textContent = ""; info.classList.remove("error");
    const file = $("items-file").files[0];
    if (!file) return;
    try {
      const bytes = new Uint8Array(await readFile(file, "bytes"));
      let text;
      try { text = new TextDecoder("utf-8", {fatal: true}).decode(bytes); } catch (e) {
        const loose = new TextDecoder("utf-8").decode(bytes);
        const line = loose.slice(0, Math.max(0, loose.indexOf("\ufffd"))).split("\n").length;
        info.textContent = `${file.name} is not UTF-8 text (line ${line}): save it as UTF-8 (in a spreadsheet: "CSV UTF-8"); the server refuses it as it is.`;
        info.classList.add("error");
        return;
      }
      text = text.replace(/^\ufeff/, "");
      const first = text.split(/\r?\n/, 1)[0] || "";
      const header = first.split(",").map((h) => h.trim().replace(/^"|"$/g, "").toLowerCase());
      if (!header.includes("text") && !header.includes("caption")) {
        info.textContent = `${file.name}: the first row needs a column "text" or "caption" (found: ${header.join(", ") || "nothing"})`;
        info.classList.add("error");
      } else {
        const n = Math.max(0, csvRows(text) - 1);
        info.textContent = `${file.name}: about ${n.toLocaleString("en-US")} items, ${kb(file.size)}`;
      }
    } catch (e) { info.textContent = String(e.message || e); info.classList.add("error"); }
  });

  $("image-file").addEventListener("change", async () => {
    const img = $("image-preview"), file = $("image-file").files[0];
    img.hidden = true; img.removeAttribute("src");
    if (!file || !IMAGE_TYPES.includes(file.type)) return;
    img.src = await readFile(file, "dataURL");
    img.hidden = false;
  });

  // ------------------------------------------------------------------ body
  function parseValue(v) {
    try { return JSON.parse(v); } catch (e) { return v; }  // numbers, true/false/null, "quoted"; else a string
  }

  function parseParams(text, where) {
    text = text.trim();
    if (!text) return {};
    if (text.startsWith("{")) {
      let v;
      try { v = JSON.parse(text); } catch (e) { throw new Error(`${where}: the parameters are not valid JSON (${e.message})`); }
      if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error(`${where}: the parameters must be a JSON object`);
      return v;
    }
    const out = {};
    text.split(/[\s,;]+/).filter(Boolean).forEach((part) => {
      const m = part.match(/^([A-Za-z_][A-Za-z0-9_]*)=(.+)$/);
      if (!m) throw new Error(`${where}: "${part}" is not name=value (write e.g. preset=heuristic delta=0.01, or a JSON object)`);
      out[m[1]] = parseValue(m[2]);
    });
    return out;
  }

  function optionalNumber(id, what, integer) {
    const raw = $(id).value.trim();
    if (raw === "") return null;
    const v = Number(raw);
    if (!Number.isFinite(v) || (integer && !Number.isInteger(v))) throw new Error(`${what} must be ${integer ? "a whole number" : "a number"}`);
    return v;
  }

  async function buildBody() {
    const body = {name: $("name").value.trim()};
    if (!body.name) throw new Error("Give the experiment a name.");
    const csv = $("items-file").files[0];
    if (!csv) throw new Error("Choose the items CSV file.");
    // the file's bytes, not text decoded here: a browser would turn bytes that are not UTF-8 into U+FFFD
    // without a word, where the server refuses them by line
    const data = await readFile(csv, "dataURL");
    body.items_csv_base64 = data.slice(data.indexOf(",") + 1);
    if ($("skip-blank").checked) body.skip_blank = true;
    const image = $("image-file").files[0];
    if (image) {
      if (!IMAGE_TYPES.includes(image.type)) throw new Error(`The context image must be PNG, JPEG, GIF or WebP (${image.name} is ${image.type || "of unknown type"}).`);
      if (image.size > MAX_IMAGE_BYTES) throw new Error(`The context image is ${kb(image.size)}; at most 2 MB.`);
      const url = await readFile(image, "dataURL");
      body.image = {content_type: image.type, data: url.slice(url.indexOf(",") + 1)};
    }
    const instructions = $("instructions").value.trim();
    if (instructions) body.instructions = instructions;

    const names = new Set();
    body.labels = Array.from($("labels").querySelectorAll(".label-row")).map((row, i) => {
      const name = row.querySelector(".label-name").value.trim();
      const raw = row.querySelector(".label-reward").value.trim();
      if (!name) throw new Error(`Label ${i + 1} has no name.`);
      if (names.has(name)) throw new Error(`Label "${name}" appears twice.`);
      names.add(name);
      const reward = Number(raw);
      if (raw === "" || !Number.isFinite(reward)) throw new Error(`Label "${name}" needs a numeric reward.`);
      return {name: name, reward: reward};
    });

    const labels = new Set();
    const learners = learnerRows().map((row, i) => {
      const label = row.querySelector(".learner-label").value.trim();
      const where = `Learner ${i + 1}${label ? ` (${label})` : ""}`;
      if (label && !LABEL_RE.test(label)) throw new Error(`${where}: a label has at most 40 letters, digits, "_", "." or "-".`);
      if (label && labels.has(label)) throw new Error(`${where}: two learners are labelled "${label}".`);
      labels.add(label);
      const share = Number(row.querySelector(".learner-share").value);
      if (!(share > 0)) throw new Error(`${where}: the share must be more than 0%.`);
      const out = {algorithm: row.querySelector(".learner-algorithm").value,
                   params: parseParams(row.querySelector(".learner-params").value, where), share: share / 100};
      if (label) out.label = label;
      return out;
    });
    if (learners.length === 1 && !learners[0].label) {
      body.algorithm = learners[0].algorithm; body.params = learners[0].params;
    } else {
      body.algorithms = learners;
    }

    const k = optionalNumber("k", "k", true), delta = optionalNumber("delta", "The error probability", false);
    if (k !== null) body.k = k;
    if (delta !== null) body.delta = delta;
    body.repeats = $("repeats").value;
    const per = optionalNumber("answers-per-participant", "Answers per participant", true);
    if (per !== null) body.answers_per_participant = per;
    const url = $("completion-url").value.trim();
    if (url) body.completion_url = url;
    if ($("allow-skip").checked) body.allow_skip = true;
    const gold = $("gold").value.split("\n").map((line) => line.trim()).filter((line) => line);
    if (gold.length) {
      body.gold = gold.map((line, i) => {
        const at = line.indexOf(":");
        if (at < 1) throw new Error(`Gold items, line ${i + 1}: write it as "label: text".`);
        return {label: line.slice(0, at).trim(), text: line.slice(at + 1).trim()};
      });
    }
    const positions = $("gold-positions").value.split(/[\s,]+/).filter((p) => p);
    if (positions.length) {
      body.gold_positions = positions.map((p) => {
        if (!/^[0-9]+$/.test(p)) throw new Error(`Gold positions: ${p} is not a position (1, 2, 3, ...).`);
        return Number(p);
      });
    }
    return body;
  }

  // ------------------------------------------------------------------ submit
  function showError(text) {
    $("form-error").textContent = text || "";
    if (text) $("form-error").scrollIntoView({block: "nearest"});
  }

  function describe(status, data) {
    let text = (data && typeof data.detail === "string") ? data.detail : `the server answered ${status}`;
    if (data && Array.isArray(data.errors) && data.errors.length) {
      text += " — " + data.errors.map((e) => `${(e.loc || []).join(".")}: ${e.msg}`).join("; ");
    }
    if (status === 413) text = `Too large for the server (${text}): use a smaller CSV or image.`;
    return text;
  }

  function adminToken() {
    const typed = $("admin-token").value.trim();
    if (typed) sessionStorage.setItem(ADMIN_KEY, typed);
    return typed || sessionStorage.getItem(ADMIN_KEY);
  }

  function askAdminToken(rejected) {
    sessionStorage.removeItem(ADMIN_KEY);
    $("admin-token").value = "";
    $("admin-token-row").hidden = false;
    showError(rejected ? "The admin token was not accepted: enter it again and press Create experiment."
                       : "This server needs its admin token to create experiments: enter it above and press Create experiment.");
    $("admin-token").focus();
  }

  function showCreated(data) {
    $("new-form").hidden = true;
    $("created-id").textContent = String(data.id);
    // the number of items the server created (an older server does not say)
    const n = typeof data.n_items === "number" ? data.n_items : null, skipped = data.skipped_blank || 0;
    let items = n === null ? "" : `with ${n.toLocaleString("en-US")} item${n === 1 ? "" : "s"}`;
    if (n !== null && skipped) {
      const lines = data.skipped_blank_lines || [];
      items += `; ${skipped.toLocaleString("en-US")} row${skipped === 1 ? "" : "s"} with a blank text left out` +
        (lines.length ? ` (line${lines.length === 1 ? "" : "s"} ${lines.join(", ")}${lines.length < skipped ? ", …" : ""})` : "");
    }
    $("created-items").textContent = items;
    $("created-items").hidden = !items;
    $("owner-token").textContent = data.owner_token;
    // the server gives root-relative links when it has no public URL configured: show them in full
    const rateUrl = new URL(data.participant_url, location.href).href;
    const p = $("participant-link");
    p.href = rateUrl; p.textContent = rateUrl;
    $("dashboard-link").href = new URL(data.dashboard_url, location.href).href;
    $("created").hidden = false;
    document.body.dataset.experimentId = String(data.id);
    window.scrollTo(0, 0);
    selectToken();
  }

  // a server with an admin token says so in the page: the token is asked for before the file goes up
  if (cfg.admin_required && !sessionStorage.getItem(ADMIN_KEY)) $("admin-token-row").hidden = false;

  $("new-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError("");
    const button = $("create");
    button.disabled = true; button.textContent = "Creating…";
    try {
      const token = adminToken();
      if (cfg.admin_required && !token) { askAdminToken(false); return; }
      let body;
      try { body = await buildBody(); } catch (e) { showError(e.message || String(e)); return; }
      const headers = {"Content-Type": "application/json"};
      if (token) headers.Authorization = "Bearer " + token;
      let r;
      try {
        r = await fetch("/api/experiments", {method: "POST", headers: headers, body: JSON.stringify(body)});
      } catch (e) { showError("Could not reach the server; try again."); return; }
      let data = null;
      try { data = await r.json(); } catch (e) { data = null; }
      if (r.status === 401) { askAdminToken(Boolean(token)); return; }
      if (r.status !== 201 || !data) { showError(describe(r.status, data)); return; }
      showCreated(data);
    } finally {
      button.disabled = false; button.textContent = "Create experiment";
    }
  });

  function selectToken() {
    const range = document.createRange();
    range.selectNodeContents($("owner-token"));
    const sel = window.getSelection();
    sel.removeAllRanges(); sel.addRange(range);
  }

  $("copy-token").addEventListener("click", async () => {
    const token = $("owner-token").textContent;
    let ok = false;
    try { await navigator.clipboard.writeText(token); ok = true; } catch (e) {
      selectToken();  // e.g. plain http on another host: no clipboard API
      try { ok = document.execCommand("copy"); } catch (e2) { ok = false; }
    }
    $("copy-status").textContent = ok ? "Copied to the clipboard." : "Select the token and copy it (Ctrl+C / ⌘C).";
  });
})();
