"""The organizer's pages as a first-time organizer met them on a held-out contest of 3,660 captions (issue #36,
item 4), in a real headless Chromium: the /new form sends the items file's bytes (a non-UTF-8 file refused by
line, as the CLI refuses it), says how many items it created (blank captions left out on request), asks for
the admin token before it uploads anything; the dashboard has participants.csv and history.csv buttons, its
done banner names every learner that stopped, Pause / Resume / Stop follow the experiment's status, and the
phone's ranking cards do not draw "somewhat funny" over "funny".

Screenshots go to tmp_path/screenshots (and /tmp/intake_shots) for a look by eye.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from pathlib import Path

import httpx
import pytest
from test_intake import LATIN1, published_summary

from conftest import HTTP, Server

pytestmark = pytest.mark.browser

ADMIN = "intake-admin-token-0123456789abcdef"
SHOTS = Path("/tmp/intake_shots")
DEFAULT_LABELS = ["unfunny", "somewhat funny", "funny"]


def shot(page, tmp_path: Path, name: str, full: bool = False) -> None:
    out = tmp_path / "screenshots"
    out.mkdir(exist_ok=True)
    page.screenshot(path=str(out / name), full_page=full)
    SHOTS.mkdir(exist_ok=True)
    shutil.copy(out / name, SHOTS / name)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser-intake")
    with Server(f"sqlite:///{tmp / 'intake.sqlite'}", log_dir=tmp) as srv:
        yield srv


def experiments(url: str, token: str | None = None) -> list[dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return HTTP.get(f"{url}/api/experiments", headers=headers).json()["experiments"]


def open_form(browser, url: str, width: int = 1280, height: int = 800):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/new")
    return ctx, page, errors


def choose_items(page, name: str, data: bytes) -> None:
    page.set_input_files("#items-file", files=[{"name": name, "mimeType": "text/csv", "buffer": data}])


# ---------------------------------------------------------------------------- the /new form
def test_the_form_sends_the_files_bytes_so_a_non_utf8_file_is_refused_by_line(browser, server, tmp_path):
    """Today's form read the file as text: the browser turned Latin-1 letters into U+FFFD and the experiment
    was created with them. Now the bytes go up and the server refuses them, naming the line, as the CLI does."""
    from playwright.sync_api import expect

    before = len(experiments(server.url))
    ctx, page, errors = open_form(browser, server.url)
    page.fill("#name", "latin-1 captions")
    choose_items(page, "latin1.csv", LATIN1)
    page.click("#create")
    expect(page.locator("#form-error")).to_contain_text("not UTF-8 text")
    assert re.search(r"\bline 2\b", page.text_content("#form-error")), page.text_content("#form-error")
    assert page.is_hidden("#created")
    assert len(experiments(server.url)) == before  # nothing created
    shot(page, tmp_path, "new-latin1-refused.png", full=True)
    assert errors == []
    ctx.close()


def test_the_form_confirms_the_number_of_items_created(browser, server, tmp_path):
    """A published summary of 3,660 captions as it is, two of them blank: first refused at the first blank
    one's line, then created with the blank rows left out, and the page says how many items it created."""
    from playwright.sync_api import expect

    text, rows = published_summary(3660, blank=(6, 1999))  # the file's lines 8 and 2001
    ctx, page, errors = open_form(browser, server.url)
    page.fill("#name", "held-out contest")
    choose_items(page, "summary.csv", text.encode("utf-8"))
    page.click("#create")
    expect(page.locator("#form-error")).to_contain_text("line 8")
    assert "blank" in page.text_content("#form-error")
    page.check("#skip-blank")
    page.click("#create")
    expect(page.locator("#created")).to_be_visible(timeout=60_000)
    expect(page.locator("#created-items")).to_have_text(
        "with 3,658 items; 2 rows with a blank text left out (lines 8, 2001)")
    eid = int(page.text_content("#created-id"))
    token = page.text_content("#owner-token")
    info = HTTP.get(f"{server.url}/api/experiments/{eid}", headers={"Authorization": f"Bearer {token}"}).json()
    assert info["n_items"] == 3658
    shot(page, tmp_path, "new-created-count.png")
    # the form's own look at the file before it goes up: rows, not lines
    page.goto(f"{server.url}/new")
    choose_items(page, "summary.csv", text.encode("utf-8"))
    expect(page.locator("#items-info")).to_have_text(re.compile(r"summary\.csv: about 3,660 items, "))
    assert errors == []
    ctx.close()


def test_the_form_asks_for_the_admin_token_before_uploading(browser, tmp_path):
    """On a server with an admin token the form shows the token field at once and sends nothing without it;
    today it uploaded the whole file, got 401, and only then asked."""
    from playwright.sync_api import expect

    with Server(f"sqlite:///{tmp_path / 'admin.sqlite'}", env={"PUREBANDITS_ADMIN_TOKEN": ADMIN},
                log_dir=tmp_path) as srv:
        ctx, page, errors = open_form(browser, srv.url, width=390, height=844)
        posts: list[str] = []
        page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
        assert page.is_visible("#admin-token")  # asked for before anything else happens
        text, _ = published_summary(40)
        page.fill("#name", "needs a token")
        choose_items(page, "summary.csv", text.encode("utf-8"))
        page.click("#create")
        expect(page.locator("#form-error")).to_contain_text("admin token")
        page.wait_for_timeout(300)
        assert posts == []  # nothing uploaded
        shot(page, tmp_path, "new-admin-token-phone.png")
        page.fill("#admin-token", "wrong")
        page.click("#create")
        expect(page.locator("#form-error")).to_contain_text("not accepted")
        assert len(posts) == 1
        page.fill("#admin-token", ADMIN)
        page.click("#create")
        expect(page.locator("#created")).to_be_visible(timeout=60_000)
        expect(page.locator("#created-items")).to_have_text("with 40 items")
        assert len(experiments(srv.url, ADMIN)) == 1
        assert errors == []
        ctx.close()


# ---------------------------------------------------------------------------- the dashboard
CAPTIONS = [f"Caption {c}: a held-out line about the cartoon" for c in "ABCD"]
STOPPERS = [  # two fixed-budget learners that stop after a few answers each, and one that never stops
    {"label": "SR12", "algorithm": "successive_rejects", "params": {"k": 1, "budget": 12}},
    {"label": "SR20", "algorithm": "successive_rejects", "params": {"k": 1, "budget": 20}},
    {"label": "Random", "algorithm": "random_sampling"},
]


def create(url: str, **body) -> tuple[int, str]:
    r = HTTP.post(f"{url}/api/experiments", json={"name": "dashboard", "seed": 4, **body}, timeout=180)
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["owner_token"]


def answer(url: str, eid: int, n: int, label_of=None) -> None:
    """``n`` answers from fresh participants (each answers one item; the default labels in turn)."""
    with httpx.Client(base_url=url, timeout=30) as c:
        done = 0
        while done < n:
            pid = c.post("/api/participants").json()["participant_id"]
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            if q["state"] != "ok":
                continue
            label = label_of(q) if label_of else DEFAULT_LABELS[done % 3]
            r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
            assert r.status_code == 200, r.text
            done += 1


def comparison(url: str, eid: int, token: str) -> dict:
    return HTTP.get(f"{url}/api/experiments/{eid}/comparison", headers={"Authorization": f"Bearer {token}"}).json()


def open_dashboard(browser, url: str, eid: int, token: str, width: int = 1280, height: int = 800, **kw):
    ctx = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=True, **kw)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/dashboard/{eid}#token={token}")
    page.wait_for_selector("#ranking tbody tr")
    return ctx, page, errors


def test_the_dashboard_downloads_participants_and_history_csv(browser, server):
    eid, token = create(server.url, items=CAPTIONS, algorithm="random_sampling")
    answer(server.url, eid, 6)
    ctx, page, errors = open_dashboard(browser, server.url, eid, token)
    for button, name, first in (("#export-participants", f"experiment-{eid}-participants.csv", "participant_id"),
                                ("#export-history", f"experiment-{eid}-history.csv", "algorithm")):
        assert page.is_visible(button), button
        with page.expect_download() as dl:
            page.click(button)
        assert dl.value.suggested_filename == name
        rows = list(csv.reader(io.StringIO(Path(dl.value.path()).read_text(encoding="utf-8"))))
        assert rows[0][0] == first, rows[0]
    assert len(rows) >= 1  # history: a header (a point comes every 100 answers)
    assert errors == []
    ctx.close()


def test_the_done_banner_names_every_learner_that_stopped(browser, server, tmp_path):
    """Three learners side by side; two stop. Whichever tab is shown, the banner names both, with the answers
    each stopped after and its recommendation, and says which learner is still running."""
    from playwright.sync_api import expect

    eid, token = create(server.url, items=CAPTIONS, algorithms=STOPPERS)
    best = {"Caption A": "funny", "Caption B": "somewhat funny"}
    n = 0
    while not all(a["done"] for a in comparison(server.url, eid, token)["algorithms"][:2]):
        answer(server.url, eid, 6, lambda q: best.get(q["item"]["text"][:9], "unfunny"))
        n += 6
        assert n < 300, comparison(server.url, eid, token)
    learners = {a["label"]: a for a in comparison(server.url, eid, token)["algorithms"]}
    assert not learners["Random"]["done"]
    ctx, page, errors = open_dashboard(browser, server.url, eid, token)
    algorithms = {a["label"]: a["algorithm"] for a in STOPPERS}
    for tab in ("Random", "SR12", "SR20"):
        page.click(f"#learner-tabs button.tab[data-label='{tab}']")
        expect(page.locator("#algorithm")).to_have_text(f"{tab} · {algorithms[tab]}")
        page.wait_for_timeout(300)
        expect(page.locator("#done-banner")).to_be_visible()
        for label in ("SR12", "SR20"):
            item = page.locator(f"#done-list li[data-label='{label}']")
            expect(item).to_contain_text(f"{label} stopped after {learners[label]['stopped_at_answers']} answers")
            expect(item).to_contain_text(learners[label]["recommendation"][0]["text"])
        assert page.locator("#done-list li").count() == 2
        expect(page.locator("#done-text")).to_contain_text("2 of 3 learners have stopped")
        expect(page.locator("#done-text")).to_contain_text("Random is still running")
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, tmp_path, "dashboard-banner-three-learners.png")
    assert errors == []
    ctx.close()
    ctx, page, errors = open_dashboard(browser, server.url, eid, token, width=390, height=844, is_mobile=True,
                                       has_touch=True)
    expect(page.locator("#done-list li")).to_have_count(2)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, tmp_path, "dashboard-banner-three-learners-phone.png")
    ctx.close()


def test_pause_resume_and_stop_follow_the_experiments_status(browser, server, tmp_path):
    """One learner that stops (its banner as before), then Pause, Resume and Stop as the status allows."""
    from playwright.sync_api import expect

    eid, token = create(server.url, items=CAPTIONS, algorithm="successive_rejects", params={"k": 1, "budget": 12})
    auth = {"Authorization": f"Bearer {token}"}
    while not HTTP.get(f"{server.url}/api/experiments/{eid}/results?limit=1", headers=auth).json()["done"]:
        answer(server.url, eid, 1)
    ctx, page, errors = open_dashboard(browser, server.url, eid, token)
    expect(page.locator("#done-text")).to_contain_text(re.compile(
        r"^The learner stopped after \d+ answers at .+: its recommendation is “.+”\. The experiment is still open "
        r"to participants\.$"))
    assert page.is_hidden("#done-list")
    expect(page.locator("#status")).to_have_text("active (learner done)")
    expect(page.locator("#pause")).to_be_enabled()
    expect(page.locator("#resume")).to_be_disabled()
    expect(page.locator("#stop")).to_be_enabled()
    page.click("#pause")
    expect(page.locator("#status")).to_have_text("paused (learner done)")
    expect(page.locator("#pause")).to_be_disabled()
    expect(page.locator("#resume")).to_be_enabled()
    expect(page.locator("#stop")).to_be_enabled()
    page.once("dialog", lambda d: d.accept())
    page.click("#stop")
    expect(page.locator("#status")).to_have_text("stopped (learner done)")
    for button in ("#pause", "#resume", "#stop"):
        expect(page.locator(button)).to_be_disabled()
    assert "stopped" in (page.get_attribute("#resume", "title") or "")
    expect(page.locator("#done-text")).to_contain_text("The experiment is stopped.")
    assert page.is_hidden("#done-stop")
    shot(page, tmp_path, "dashboard-stopped-controls.png")
    assert errors == []
    ctx.close()


# the label counts of each ranking card: (card, label) pairs whose text is wider than its box, or whose box
# overlaps the next one's on the same line
LABEL_OVERLAPS = """() => {
  const out = [];
  document.querySelectorAll('#ranking tbody tr').forEach((tr, i) => {
    const cells = Array.from(tr.querySelectorAll('td.label-count'));
    cells.forEach((td, j) => {
      if (td.scrollWidth > td.clientWidth + 1) out.push([i, td.dataset.label, 'wider than its box']);
      const next = cells[j + 1];
      if (!next) return;
      const a = td.getBoundingClientRect(), b = next.getBoundingClientRect();
      if (Math.abs(a.top - b.top) < 2 && a.right > b.left + 1) out.push([i, td.dataset.label, 'overlaps']);
    });
  });
  return out;
}"""


def test_phone_ranking_cards_do_not_draw_somewhat_funny_over_funny(browser, server, tmp_path):
    from playwright.sync_api import expect

    eid, token = create(server.url, items=CAPTIONS + ["Caption E", "Caption F"], algorithm="random_sampling")
    answer(server.url, eid, 12)
    for width, height in ((390, 844), (320, 640)):
        ctx, page, errors = open_dashboard(browser, server.url, eid, token, width=width, height=height,
                                           is_mobile=True, has_touch=True)
        expect(page.locator("#ranking tbody tr")).to_have_count(6)
        page.wait_for_timeout(300)
        assert page.evaluate(LABEL_OVERLAPS) == []
        # each count sits next to its own label: "somewhat funny 3", never "somewhat funny" over "funny"
        cell = page.locator("#ranking tbody tr").first.locator("td.label-count[data-label='somewhat funny']")
        assert re.fullmatch(r"\d+", cell.text_content())
        if width == 390:  # (at 320 px the sort menu above the cards is wider than the screen: not this test's)
            assert page.evaluate("document.scrollingElement.scrollWidth") <= width
        page.locator("#ranking").scroll_into_view_if_needed()
        shot(page, tmp_path, f"dashboard-ranking-cards-{width}.png")
        assert errors == []
        ctx.close()
