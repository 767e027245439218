"""The organizer's flow in a real headless Chromium: /new form, participants, dashboard with two learners, /admin.

Screenshots go to tmp_path; with PUREBANDITS_UPDATE_DOC_IMAGES set they are copied to docs/img/.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import HTTP
from purebandits.service.validation import DEFAULT_ALGORITHM

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
ADMIN = "organizer-admin-token-0123456789"
SUMMARY_COLUMNS = ["rank", "item_id", "funny", "somewhat_funny", "unfunny", "count", "score", "precision", "contest",
                   "caption"]

pytestmark = pytest.mark.browser

# 12 captions with a fixed "true" funniness: every participant gives each caption its label, so the
# answers are noiseless and LUCB1 (k = 2, sigma = 0.05) can stop after one answer per caption
CAPTIONS = [
    ("c01", "I told you the elevator was for people only.", "funny"),
    ("c02", "He says he's between aquariums right now.", "somewhat funny"),
    ("c03", "Let's just say the merger went swimmingly.", "unfunny"),
    ("c04", "Honestly, the commute is the best part.", "unfunny"),
    ("c05", "Don't look now, but I think it's the auditors.", "funny"),
    ("c06", "We were promised a corner office, not a corner pond.", "somewhat funny"),
    ("c07", "It's casual Friday, technically.", "unfunny"),
    ("c08", "The new hire really makes a splash.", "unfunny"),
    ("c09", "Has anyone seen my stapler? It's \"red\", with, commas.", "unfunny"),
    ("c10", "Per my last email: glub.", "somewhat funny"),
    ("c11", "HR says we have to call it a 'water feature'.", "unfunny"),
    ("c12", "At least the plants are thriving.", "unfunny"),
]
TRUTH = {text: label for _, text, label in CAPTIONS}
TOP2 = {text for _, text, label in CAPTIONS if label == "funny"}
# docs/img/dashboard-two-learners.png comes from test_browser_dashboard.py
SHOTS = ("organizer-new.png", "organizer-token.png", "organizer-admin.png")


def write_captions_csv(path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text"])
        w.writerows([cid, text] for cid, text, _ in CAPTIONS)


def write_cartoon_png(path: Path) -> None:
    """A small made-up cartoon (an office with a fish tank), drawn with matplotlib."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle, Ellipse, Rectangle

    fig = Figure(figsize=(4.8, 2.7), dpi=100)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 16)
    ax.set_ylim(0, 9)
    ax.axis("off")
    ax.add_patch(Rectangle((0, 0), 16, 9, color="#fbf7ef"))
    ax.add_patch(Rectangle((0, 0), 16, 1.6, color="#e6dccb"))
    ax.add_patch(Rectangle((8.5, 1.6), 6, 4.2, facecolor="#cfe8f3", edgecolor="#2f3b4c", lw=2))
    ax.add_patch(Ellipse((11, 3.6), 2.4, 1.2, color="#f29f3d"))
    ax.add_patch(Circle((10.3, 3.8), 0.15, color="#1d2430"))
    for x in (3.0, 5.6):
        ax.add_patch(Circle((x, 6.2), 0.7, facecolor="white", edgecolor="#1d2430", lw=2))
        ax.plot([x, x], [5.5, 3.2], color="#1d2430", lw=2)
        ax.plot([x - 0.9, x, x + 0.9], [3.9, 4.8, 3.9], color="#1d2430", lw=2)
        ax.plot([x - 0.7, x, x + 0.7], [1.6, 3.2, 1.6], color="#1d2430", lw=2)
    fig.savefig(path)


class Participant:
    """One participant: a browser context on the rating page with a crowd-work id in the link."""

    def __init__(self, browser, url: str, worker: str, keyboard: bool, phone: bool):
        size = {"width": 390, "height": 844} if phone else {"width": 1000, "height": 800}
        self.ctx = browser.new_context(viewport=size, device_scale_factor=1, is_mobile=phone, has_touch=phone)
        self.page = self.ctx.new_page()
        self.page.goto(f"{url}?participant={worker}")
        self.worker, self.keyboard = worker, keyboard
        self.page.wait_for_function("document.getElementById('participant-id').textContent !== '…'")
        self.pid = self.page.text_content("#participant-id")
        self.seen: list[str] = []

    def current(self) -> tuple[str | None, str]:
        """(query id or None, item text) of what the page shows; a query id only when the buttons take clicks."""
        return self.page.evaluate("""() => {
            const card = document.getElementById('card');
            const ready = document.querySelector('#buttons button.label:not([disabled])') !== null;
            return [ready ? (card.dataset.queryId || null) : null, document.getElementById('item-text').textContent];
        }""")

    def rate(self, qid: str, text: str) -> None:
        label = TRUTH[text]
        if self.keyboard:  # the rating page's keys 1..n pick the n-th label button
            labels = self.page.eval_on_selector_all("#buttons button.label", "bs => bs.map(b => b.dataset.label)")
            self.page.keyboard.press(str(labels.index(label) + 1))
        else:
            self.page.click(f"#buttons button[data-label='{label}']")
        self.page.wait_for_function("q => document.getElementById('card').dataset.queryId !== q", arg=qid)


def full_screenshot(page, path: Path) -> None:
    """The whole page: the viewport grown to the page's height for the shot, then restored.

    (Playwright's ``full_page=True`` left this Chromium's page deaf to later clicks.)
    """
    size = page.viewport_size
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": max(height, size["height"])})
    page.screenshot(path=str(path))
    page.set_viewport_size(size)


def read_summary(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == SUMMARY_COLUMNS
        return list(reader)


def test_organizer_creates_runs_compares_archives_and_deletes(browser, server_cls, tmp_path):
    t_start = time.monotonic()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    captions_csv, cartoon = tmp_path / "captions.csv", tmp_path / "cartoon.png"
    write_captions_csv(captions_csv)
    write_cartoon_png(cartoon)
    db = f"sqlite:///{tmp_path / 'organizer.sqlite'}"
    admin_auth = {"Authorization": f"Bearer {ADMIN}"}
    with server_cls(db, env={"PUREBANDITS_ADMIN_TOKEN": ADMIN}, log_dir=tmp_path) as srv:
        desk = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1,
                                   accept_downloads=True)
        page = desk.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

        # ---- the new-experiment form, filled as a person would
        page.goto(f"{srv.url}/new")
        page.fill("#name", "Caption contest: the office aquarium")
        page.set_input_files("#items-file", str(captions_csv))
        page.wait_for_function("document.getElementById('items-info').textContent.includes('12 items')")
        page.set_input_files("#image-file", str(cartoon))
        page.wait_for_selector("#image-preview:not([hidden])")
        page.fill("#instructions", "How funny is this caption for the cartoon above? Go with your first reaction.")
        assert page.locator("#labels .label-name").evaluate_all("es => es.map(e => e.value)") == [
            "unfunny", "somewhat funny", "funny"]
        assert page.locator(".learner-row").count() == 1
        first = page.locator(".learner-row").nth(0)
        first.locator(".learner-label").fill("LUCB")
        first.locator(".learner-algorithm").select_option("lucb1")
        assert "Kalyanakrishnan" in first.locator(".learner-hint").text_content()
        first.locator(".learner-params").fill("sigma=0.05")
        page.click("#add-learner")
        second = page.locator(".learner-row").nth(1)
        second.locator(".learner-label").fill("Random")
        second.locator(".learner-algorithm").select_option("random_sampling")
        assert page.locator(".learner-share").evaluate_all("es => es.map(e => e.value)") == ["50", "50"]
        page.fill("#k", "2")
        page.fill("#delta", "0.05")
        page.select_option("#repeats", "never")
        # with repeats = never a participant sees every caption once, then they would come round again:
        # 12 answers each, then the participant is thanked with a completion code
        page.fill("#answers-per-participant", "12")
        full_screenshot(page, shots / "organizer-new.png")
        first.locator(".learner-params").fill("sigma=0.05 bogus=1")  # a mistake the server will name

        # no admin token yet: the server answers 401, the page asks for it and keeps the form
        page.click("#create")
        page.wait_for_selector("#admin-token-row:not([hidden])")
        assert "admin token" in page.text_content("#form-error")
        assert page.input_value("#name") == "Caption contest: the office aquarium"
        page.fill("#admin-token", ADMIN)
        page.click("#create")
        # the unknown parameter: the server's message is shown next to the form, the values stay
        page.wait_for_function("document.getElementById('form-error').textContent.includes('bogus')")
        assert page.is_visible("#new-form") and not page.is_visible("#created")
        assert first.locator(".learner-params").input_value() == "sigma=0.05 bogus=1"
        assert second.locator(".learner-algorithm").input_value() == "random_sampling"
        first.locator(".learner-params").fill("sigma=0.05")
        page.click("#create")
        # on a fresh install, creating compiles the new learners' code first (service.warmup: LUCB1's
        # ask/tell kernels take 15-45 s on two busy cores), so the answer may take that long
        page.wait_for_selector("#created:not([hidden])", timeout=180_000)
        assert not page.is_visible("#new-form")
        token = page.text_content("#owner-token")
        eid = int(page.text_content("#created-id"))
        warning = page.text_content("#created .warning")
        assert "not shown again" in warning and "dashboard" in warning
        dash_url = page.get_attribute("#dashboard-link", "href")
        rate_url = page.get_attribute("#participant-link", "href")
        assert dash_url.endswith(f"/dashboard/{eid}#token={token}") and rate_url.endswith(f"/rate/{eid}")
        page.click("#copy-token")
        page.wait_for_function("document.getElementById('copy-status').textContent !== ''")
        page.screenshot(path=str(shots / "organizer-token.png"))
        # the token is not kept anywhere in the browser
        assert token not in page.evaluate("JSON.stringify(sessionStorage) + JSON.stringify(localStorage)")

        auth = {"Authorization": f"Bearer {token}"}
        info = HTTP.get(f"{srv.url}/api/experiments/{eid}", headers=auth).json()
        assert info["n_items"] == 12 and info["k"] == 2 and info["has_image"] and info["repeats"] == "never"
        assert info["instructions"].startswith("How funny") and info["answers_per_participant"] == 12
        assert [(a["label"], a["algorithm"], a["share"]) for a in info["algorithms"]] == [
            ("LUCB", "lucb1", 0.5), ("Random", "random_sampling", 0.5)]
        assert info["algorithms"][0]["params"]["sigma"] == 0.05
        assert HTTP.get(f"{srv.url}/api/experiments/{eid}/image").content == cartoon.read_bytes()

        # ---- participants: separate browser contexts, keyboard or mouse, until the learners are
        # done or every participant has seen every item (repeats = never) or a cap of answers
        people = [Participant(browser, rate_url, f"worker-{i}", keyboard=i == 0, phone=i == 1) for i in range(3)]
        assert [p.pid for p in people] == ["worker-0", "worker-1", "worker-2"]
        assert people[0].page.text_content("#instructions").startswith("How funny")
        assert people[0].page.is_visible("#context-image")

        def comparison() -> dict:
            return HTTP.get(f"{srv.url}/api/experiments/{eid}/comparison", headers=auth).json()

        cap, n_answers, idle_since = 60, 0, None
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and n_answers < cap:
            busy = False
            for p in people:
                qid, text = p.current()
                if qid is None:
                    continue
                assert text in TRUTH
                assert text not in p.seen, f"{p.pid} was shown {text!r} twice (after {len(p.seen)} items)"
                p.seen.append(text)
                p.rate(qid, text)
                n_answers += 1
                busy = True
            if busy:
                idle_since = None
                continue
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 3:  # nobody has an item: every learner is done or exhausted
                break
            time.sleep(0.1)
        cmp = comparison()
        by_label = {a["label"]: a for a in cmp["algorithms"]}
        assert sum(a["n_answers"] for a in cmp["algorithms"]) == n_answers == sum(len(p.seen) for p in people)
        assert sum(a["n_participants"] for a in cmp["algorithms"]) == 3
        assert all(len(p.seen) == len(set(p.seen)) for p in people)
        assert by_label["LUCB"]["n_participants"] >= 1 and by_label["Random"]["n_participants"] >= 1
        lucb = by_label["LUCB"]
        # it stops after one answer per caption; an answer to an item already out when it stopped still counts
        assert lucb["done"] and 12 <= lucb["stopped_at_answers"] <= lucb["n_answers"]
        assert {r["text"] for r in lucb["recommendation"]} == TOP2
        assert not by_label["Random"]["done"]  # the baseline never stops by itself
        assert by_label["Random"]["n_answers"] <= 12 * by_label["Random"]["n_participants"]
        assigned = {row["participant_id"]: row for row in csv.DictReader(io.StringIO(
            HTTP.get(f"{srv.url}/api/experiments/{eid}/participants.csv", headers=auth).text))}
        for p in people:
            assert int(assigned[p.pid]["answers"]) == len(p.seen)
            if assigned[p.pid]["algorithm"] == "Random" and len(p.seen) == 12:  # thanked with a code
                assert p.page.is_visible("#complete")
                assert p.page.text_content("#completion-code") == assigned[p.pid]["completion_code"] != ""
            elif assigned[p.pid]["algorithm"] == "Random":
                # the baseline draws items i.i.d.: near the end it rarely draws one this participant has
                # not seen, and the server says "exhausted" (the page asks again 30 s later)
                assert "every item we need" in p.page.text_content("#item-text")
            else:
                # told so at its next ask (a participant whose last ask found nothing new asks again 30 s
                # later; coming back to the page asks at once)
                if "found its answer" not in p.page.text_content("#item-text"):
                    p.page.reload()
                p.page.wait_for_function(
                    "document.getElementById('item-text').textContent.includes('found its answer')")
            p.ctx.close()

        # ---- the dashboard with two learners: tabs, comparison, one summary CSV per learner
        dash = desk.new_page()
        dash.goto(dash_url)
        dash.wait_for_selector("#learner-tabs:not([hidden]) button.tab")
        assert dash.locator("#learner-tabs button.tab").all_text_contents() == ["LUCB", "Random"]
        dash.wait_for_selector("#comparison:not([hidden]) #comparison-table tbody tr")
        rows = dash.locator("#comparison-table tbody tr")
        assert rows.count() == 2
        assert f"stopped at {lucb['stopped_at_answers']} answers" in rows.nth(0).locator("td.state").text_content()
        assert "running" in rows.nth(1).locator("td.state").text_content()
        assert "in common" in dash.text_content("#agreement")
        dash.wait_for_function(f"document.getElementById('n-answers').textContent === '{lucb['n_answers']:,}'")
        assert set(dash.locator("#ranking tbody tr.rec td.text").all_text_contents()) == TOP2
        assert "lucb1" in dash.text_content("#algorithm")
        dash.wait_for_timeout(600)  # the progress bar's transition
        full_screenshot(dash, shots / "dashboard-two-learners.png")
        dash.click("#learner-tabs button.tab[data-label='Random']")
        dash.wait_for_function("document.getElementById('algorithm').textContent.includes('random_sampling')")
        dash.wait_for_function("document.getElementById('n-answers').textContent === "
                               f"'{by_label['Random']['n_answers']:,}'")
        assert dash.get_attribute("#learner-tabs button.tab[data-label='Random']", "aria-selected") == "true"
        for label in ("LUCB", "Random"):
            with dash.expect_download() as dl:
                dash.click(f"#comparison-table button.export-summary-learner[data-label='{label}']")
            assert dl.value.suggested_filename == f"{eid}_summary_{label}.csv"
            target = tmp_path / dl.value.suggested_filename
            dl.value.save_as(target)
            rows_csv = read_summary(target)
            assert len(rows_csv) == 12
            assert sum(int(r["count"]) for r in rows_csv) == by_label[label]["n_answers"]
            assert {r["contest"] for r in rows_csv} == {"Caption contest: the office aquarium"}
        if by_label["LUCB"]["n_answers"]:
            top = read_summary(tmp_path / f"{eid}_summary_LUCB.csv")[:2]
            assert {r["caption"] for r in top} == TOP2
        with dash.expect_download() as dl:  # the header's button downloads the selected learner's
            dash.click("#export-summary")
        assert dl.value.suggested_filename == f"{eid}_summary_Random.csv"

        # ---- admin page: a second experiment to delete, then archive the first
        other = HTTP.post(f"{srv.url}/api/experiments", headers=admin_auth, timeout=180,  # may compile (above)
                           json={"name": "scratch experiment", "items": ["a", "b", "c"], "algorithm": "lucb1"})
        assert other.status_code == 201
        other_id = other.json()["id"]
        admin = desk.new_page()  # a new tab: no admin token in its sessionStorage yet
        admin.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        admin.goto(f"{srv.url}/admin")
        admin.wait_for_selector("#admin-token-form:not([hidden])")
        admin.fill("#admin-token-input", ADMIN)
        admin.press("#admin-token-input", "Enter")
        admin.wait_for_selector(f"#experiments tbody tr[data-eid='{eid}']")
        row = admin.locator(f"#experiments tbody tr[data-eid='{eid}']")
        assert row.locator("td.name").text_content() == "Caption contest: the office aquarium"
        assert row.locator("td.learners").text_content() == "LUCB, Random"
        assert row.locator("td.answers").text_content() == str(n_answers)
        assert row.locator("a", has_text="dashboard").get_attribute("href").endswith(f"/dashboard/{eid}")
        assert admin.locator("#experiments tbody tr").count() == 2
        assert admin.is_hidden("#archived-section")
        admin.screenshot(path=str(shots / "organizer-admin.png"))

        row.locator("button.archive").click()
        admin.wait_for_selector("#archive-dialog[open]")
        assert "Caption contest" in admin.text_content("#archive-dialog h2")
        admin.click("#archive-go")
        admin.wait_for_selector(f"#archived tbody tr[data-eid='{eid}']")
        assert admin.locator(f"#experiments tbody tr[data-eid='{eid}']").count() == 0
        assert "archived" in admin.text_content("#notice").lower()
        assert HTTP.get(f"{srv.url}/api/experiments/{eid}", headers=auth).json()["status"] == "archived"
        pid = HTTP.post(f"{srv.url}/api/participants").json()["participant_id"]
        ask = HTTP.post(f"{srv.url}/api/experiments/{eid}/queries", json={"participant_id": pid})
        assert ask.json()["state"] == "archived"
        # its dashboard still opens from the list, with the admin token this tab holds
        admin.click(f"#archived tbody tr[data-eid='{eid}'] a:has-text('dashboard')")
        admin.wait_for_function(f"document.getElementById('n-answers').textContent === '{lucb['n_answers']:,}'")
        assert "archived" in admin.text_content("#status")
        admin.go_back()
        admin.wait_for_selector(f"#experiments tbody tr[data-eid='{other_id}']")

        admin.locator(f"#experiments tbody tr[data-eid='{other_id}'] button.delete").click()
        admin.wait_for_selector("#delete-dialog[open]")
        assert admin.is_disabled("#delete-go")
        admin.fill("#delete-confirm", "scratch")  # not the whole name: still refused
        assert admin.is_disabled("#delete-go")
        admin.press("#delete-confirm", "Enter")
        assert admin.is_visible("#delete-dialog")
        admin.fill("#delete-confirm", "scratch experiment")
        assert admin.is_enabled("#delete-go")
        admin.click("#delete-go")
        admin.wait_for_selector(f"#experiments tbody tr[data-eid='{other_id}']", state="detached")
        assert "deleted" in admin.text_content("#notice").lower()
        listed = HTTP.get(f"{srv.url}/api/experiments", headers=admin_auth).json()["experiments"]
        assert [(e["id"], e["status"]) for e in listed] == [(eid, "archived")]
        assert HTTP.get(f"{srv.url}/api/experiments/{other_id}", headers=admin_auth).status_code in (401, 404)
        assert dialogs == []
        desk.close()
    for name in SHOTS:
        assert (shots / name).stat().st_size > 1000
    if os.environ.get("PUREBANDITS_UPDATE_DOC_IMAGES"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name in SHOTS:
            shutil.copy(shots / name, DOCS_IMG / name)
    assert time.monotonic() - t_start < 90


def test_new_form_errors_stay_next_to_the_form(browser, shared_server, tmp_path):
    """Client-side checks (bad parameters, a CSV without a text column) and a server 422 keep the form as it was."""
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("title\nsomething\n", encoding="utf-8")
    good_csv = tmp_path / "good.csv"
    write_captions_csv(good_csv)
    srv = shared_server  # no admin token: anyone may create
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1,
                              is_mobile=True, has_touch=True)
    page = ctx.new_page()
    page.goto(f"{srv.url}/new")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.fill("#name", "errors")
    page.set_input_files("#items-file", str(bad_csv))
    page.wait_for_function("document.getElementById('items-info').textContent.includes('\"text\"')")
    page.locator(".learner-params").fill("preset heuristic")
    page.click("#create")
    page.wait_for_function("document.getElementById('form-error').textContent.includes('name=value')")
    page.locator(".learner-params").fill('{"delta": 2}')
    page.click("#create")
    # the server refuses the CSV first or the delta: either way its message is shown
    page.wait_for_function("document.getElementById('form-error').textContent.length > 0 && "
                           "!document.getElementById('form-error').textContent.includes('name=value')")
    assert page.is_visible("#new-form") and page.is_hidden("#created")
    page.set_input_files("#items-file", str(good_csv))
    page.click("#create")
    page.wait_for_function("document.getElementById('form-error').textContent.includes('delta')")
    assert page.input_value("#name") == "errors"
    page.locator(".learner-params").fill("")
    page.click("#create")
    # on a fresh install, creating compiles the new learners' code first (service.warmup: LUCB1's
    # ask/tell kernels take 15-45 s on two busy cores), so the answer may take that long
    page.wait_for_selector("#created:not([hidden])", timeout=180_000)
    assert page.is_hidden("#admin-token-row")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    token = page.text_content("#owner-token")
    eid = int(page.text_content("#created-id"))
    info = HTTP.get(f"{srv.url}/api/experiments/{eid}", headers={"Authorization": f"Bearer {token}"}).json()
    assert info["algorithm"] == DEFAULT_ALGORITHM and len(info["algorithms"]) == 1 and info["n_items"] == 12
    ctx.close()


def test_dashboard_with_one_learner_has_no_tabs(browser, shared_server):
    srv = shared_server
    r = HTTP.post(f"{srv.url}/api/experiments",
                   json={"name": "one", "items": ["a", "b", "c"], "algorithm": "lil_ucb", "seed": 1})
    eid, token = r.json()["id"], r.json()["owner_token"]
    ctx = browser.new_context(viewport={"width": 1000, "height": 800}, accept_downloads=True)
    dash = ctx.new_page()
    dash.goto(f"{srv.url}/dashboard/{eid}#token={token}")
    dash.wait_for_function("document.getElementById('n-items').textContent === '3'")
    assert dash.is_hidden("#learner-tabs") and dash.is_hidden("#comparison")
    assert dash.text_content("#export-summary") == "Summary CSV"
    with dash.expect_download() as dl:
        dash.click("#export-summary")
    assert dl.value.suggested_filename == f"{eid}_summary_LilUCB.csv"  # as the server names it
    text = Path(dl.value.path()).read_text(encoding="utf-8")
    assert next(csv.reader(io.StringIO(text))) == SUMMARY_COLUMNS
    ctx.close()
