// Admin page: every experiment (GET /api/experiments), archive and delete with confirmation.
// The admin token is asked for when the server answers 401 and kept in sessionStorage (shared
// with the new-experiment page and the dashboards of this tab). Text goes in with textContent.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const ADMIN_KEY = "purebandits.admin_token";
  let token = sessionStorage.getItem(ADMIN_KEY);

  function headers() { return token ? {Authorization: "Bearer " + token} : {}; }
  function notice(text) { $("notice").textContent = text || ""; }
  function error(text) { $("error").textContent = text || ""; }

  function askToken(msg) {
    $("admin-token-form").hidden = false;
    error(msg);
    $("admin-token-input").focus();
  }

  $("admin-token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("admin-token-input").value.trim();
    if (token) sessionStorage.setItem(ADMIN_KEY, token); else sessionStorage.removeItem(ADMIN_KEY);
    $("admin-token-input").value = "";
    $("admin-token-form").hidden = true;
    error("");
    load();
  });

  async function detail(r) {
    try { const d = await r.json(); if (d && typeof d.detail === "string") return d.detail; } catch (e) { /* not JSON */ }
    return `the server answered ${r.status}`;
  }

  function when(t) {
    if (t === null || t === undefined) return "–";
    const d = new Date(t * 1000);
    return `${d.toLocaleDateString()} ${d.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"})}`;
  }

  function td(tr, label, content, cls) {
    const cell = document.createElement("td");
    cell.dataset.label = label;
    if (cls) cell.className = cls;
    if (content instanceof Node) cell.appendChild(content); else cell.textContent = content;
    tr.appendChild(cell);
    return cell;
  }

  function link(href, text) {
    const a = document.createElement("a");
    a.href = href; a.textContent = text;
    return a;
  }

  function button(text, cls, onClick) {
    const b = document.createElement("button");
    b.type = "button"; b.className = cls; b.textContent = text;
    b.addEventListener("click", onClick);
    return b;
  }

  function row(e) {
    const tr = document.createElement("tr");
    tr.dataset.eid = String(e.id);
    tr.className = `status-${e.status}`;
    td(tr, "#", String(e.id), "num");
    td(tr, "name", e.name, "name");
    const badge = document.createElement("span");
    badge.className = `badge ${e.status}`; badge.textContent = e.status;
    td(tr, "status", badge, "status");
    td(tr, "items", String(e.n_items), "num");
    td(tr, "answers", String(e.n_answers === undefined ? "–" : e.n_answers), "num answers");
    td(tr, "learners", (e.algorithms || []).join(", ") || "–", "learners");
    td(tr, "created", when(e.created_at), "created-at");
    const links = document.createElement("span");
    links.className = "links";
    links.append(link(e.participant_url || `/rate/${e.id}`, "rating page"), " ",
                 link(e.dashboard_url || `/dashboard/${e.id}`, "dashboard"));
    td(tr, "links", links, "links");
    const actions = document.createElement("span");
    actions.className = "row-actions";
    if (e.status !== "archived") actions.appendChild(button("Archive", "archive secondary", () => confirmArchive(e)));
    actions.appendChild(button("Delete", "delete danger", () => confirmDelete(e)));
    td(tr, "actions", actions, "acts");
    return tr;
  }

  async function load() {
    let r;
    try { r = await fetch("/api/experiments", {headers: headers()}); } catch (e) { error("Could not reach the server."); return; }
    if (r.status === 401) { askToken(token ? "The admin token was not accepted." : "Enter the admin token to list the experiments."); return; }
    if (!r.ok) { error(await detail(r)); return; }
    const data = await r.json();
    const all = data.experiments || [];
    const live = all.filter((e) => e.status !== "archived"), archived = all.filter((e) => e.status === "archived");
    const body = $("experiments").querySelector("tbody"), abody = $("archived").querySelector("tbody");
    body.replaceChildren(...live.map(row));
    abody.replaceChildren(...archived.map(row));
    $("experiments").hidden = live.length === 0;
    $("empty").hidden = live.length !== 0;
    $("archived-section").hidden = archived.length === 0;
    document.body.dataset.loaded = String(Date.now());
  }

  async function act(method, path, done) {
    let r;
    try { r = await fetch(path, {method: method, headers: headers()}); } catch (e) { error("Could not reach the server."); return; }
    if (r.status === 401) {
      askToken(token ? "Not allowed with this token: enter the admin token." : "This needs the admin token: enter it, then try again.");
      return;
    }
    if (!r.ok) { error(await detail(r)); return; }
    error(""); notice(done);
    await load();
  }

  function what(e) { return `experiment ${e.id} “${e.name}”`; }

  function confirmArchive(e) {
    const dlg = $("archive-dialog");
    dlg.querySelector(".what").textContent = what(e);
    dlg.returnValue = "";
    dlg.onclose = () => {
      if (dlg.returnValue === "archive") act("POST", `/api/experiments/${e.id}/archive`, `Archived ${what(e)}.`);
    };
    notice("");
    dlg.showModal();
  }

  function confirmDelete(e) {
    const dlg = $("delete-dialog"), input = $("delete-confirm"), go = $("delete-go");
    const matches = () => input.value.trim() === String(e.id) || input.value.trim() === e.name;
    dlg.querySelector(".what").textContent = what(e);
    $("delete-id").textContent = String(e.id);
    $("delete-name").textContent = e.name;
    input.value = "";
    go.disabled = true;
    input.oninput = () => { go.disabled = !matches(); };
    // Enter in the field deletes only when it matches (the form's default button is Cancel)
    input.onkeydown = (ev) => { if (ev.key === "Enter") { ev.preventDefault(); if (matches()) dlg.close("delete"); } };
    dlg.returnValue = "";
    dlg.onclose = () => {
      if (dlg.returnValue === "delete" && matches()) act("DELETE", `/api/experiments/${e.id}`, `Deleted ${what(e)}.`);
    };
    notice("");
    dlg.showModal();
    input.focus();
  }

  load();
})();
