"""Real headless Chromium (system /usr/bin/chromium, no browser download) on the rating page and dashboard."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from browser_support import NEW_ITEM, let_arming_pass

from conftest import HTTP, Server

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    """``purebandits serve --demo`` on a SQLite file of its own, shared by the module's two tests: the rating page
    and dashboard test uses the demo experiment (id 1), the markup test an experiment of its own (a server start
    costs about 3 s of a core; ``--demo`` changes no setting, it only adds the demo experiment at the start)."""
    tmp = tmp_path_factory.mktemp("demo-server")
    with Server(f"sqlite:///{tmp / 'browser.sqlite'}", "--demo", log_dir=tmp) as srv:
        yield srv, tmp


def test_rate_20_items_then_dashboard_updates(browser, demo_server, tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    srv, log_dir = demo_server
    # the demo experiment is id 1; --demo printed its token, the admin path is not needed:
    # read the token from the server log
    log = next(log_dir.glob("server-*.log")).read_text()
    token = [ln.split()[-1] for ln in log.splitlines() if "owner token:" in ln][0]
    auth = {"Authorization": f"Bearer {token}"}
    assert HTTP.get(f"{srv.url}/api/experiments/1/results", headers=auth).json()["n_answers"] == 0

    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1,
                                is_mobile=True, has_touch=True)
    page = phone.new_page()
    # the page's clock is the test's: each item's 250 ms button arming passes at once in the page's time
    page.clock.install()
    page.goto(f"{srv.url}/rate/1")
    seen = []
    labels = ["funny", "somewhat funny", "unfunny"]
    qid = None
    for i in range(20):
        let_arming_pass(page, shown=NEW_ITEM, arg=qid)
        page.wait_for_selector("#buttons button.label:not([disabled])")
        qid = page.get_attribute("#card", "data-query-id")
        seen.append(page.text_content("#item-text"))
        if i == 0:
            page.screenshot(path=str(shots / "rate.png"))
            # buttons fit a phone-width screen without horizontal scrolling
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.click(f"#buttons button[data-label='{labels[i % 3]}']")
        page.wait_for_function(
            "q => document.getElementById('card').dataset.queryId !== q", arg=qid)
        page.wait_for_function(f"document.getElementById('n-rated').textContent === '{i + 1}'")
    assert all(seen)
    res = HTTP.get(f"{srv.url}/api/experiments/1/results", headers=auth).json()
    assert res["n_answers"] == 20

    desk = browser.new_context(viewport={"width": 1200, "height": 900})
    dash = desk.new_page()
    dash.goto(f"{srv.url}/dashboard/1#token={token}")
    dash.wait_for_function("document.getElementById('n-answers').textContent === '20'")
    rows = dash.locator("#ranking tbody tr")
    assert rows.count() == 30
    top = dash.text_content("#ranking tbody tr:first-child td.text")
    assert top == res["ranking"][0]["text"]
    totals = dash.text_content("#label-totals")
    assert "funny: 7" in totals and "unfunny: 6" in totals
    dash.screenshot(path=str(shots / "dashboard-20.png"), full_page=False)
    # a few more answers from the rating page: the dashboard updates by itself
    for i in range(3):
        let_arming_pass(page, shown=NEW_ITEM, arg=qid)
        page.wait_for_selector("#buttons button.label:not([disabled])")
        qid = page.get_attribute("#card", "data-query-id")
        page.click("#buttons button[data-label='funny']")
        page.wait_for_function(f"document.getElementById('n-rated').textContent === '{21 + i}'")
    dash.wait_for_function("document.getElementById('n-answers').textContent === '23'")
    assert "funny: 10" in dash.text_content("#label-totals")
    dash.screenshot(path=str(shots / "dashboard.png"), full_page=False)
    # a wrong token shows the token form, never data
    other = desk.new_page()
    other.goto(f"{srv.url}/dashboard/1#token=wrong")
    other.wait_for_selector("#token-form:not([hidden])")
    assert other.text_content("#n-answers") == "0"
    phone.close()
    desk.close()
    for name in ("rate.png", "dashboard.png"):
        assert (shots / name).stat().st_size > 1000
    if os.environ.get("PUREBANDITS_UPDATE_DOC_IMAGES"):  # docs/img/dashboard.png: test_browser_dashboard.py
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name in ("rate.png",):
            shutil.copy(shots / name, DOCS_IMG / name)


XSS_TEXTS = [
    "<script>window.__xss=1</script>",
    "<img src=x onerror=window.__xss=1>",
    "<svg onload=window.__xss=1></svg>",
    "\"><script>window.__xss=1</script>",
    "</td><img src=x onerror=window.__xss=1>",
    "javascript:window.__xss=1",
]


# elements the hostile texts would create if they were parsed as markup
NO_INJECTED = "document.querySelectorAll('img[src=\"x\"], [onerror], [onload], b:not([id])').length"


def test_no_script_runs_from_item_texts_on_rating_page_or_dashboard(browser, demo_server):
    """Items and experiment name full of markup: shown literally, never executed."""
    srv, _ = demo_server
    items = [{"id": f"<b>{i}</b>", "text": t} for i, t in enumerate(XSS_TEXTS)]
    items.append({"id": "img", "text": "image item <script>window.__xss=1</script>",
                  "image_url": "/x\" onerror=\"window.__xss=1"})
    r = HTTP.post(f"{srv.url}/api/experiments", json={
        "name": "<script>window.__xss=1</script><img src=x onerror=window.__xss=1>", "items": items,
        "seed": 4})
    assert r.status_code == 201
    eid, token = r.json()["id"], r.json()["owner_token"]
    texts = {it["text"] for it in items}
    ctx = browser.new_context(viewport={"width": 900, "height": 900})
    page = ctx.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.clock.install()  # the 250 ms button arming passes at once in the page's time (test_browser_pairwise)
    page.goto(f"{srv.url}/rate/{eid}")
    shown = set()
    qid = None
    for _ in range(10):
        let_arming_pass(page, shown=NEW_ITEM, arg=qid)
        page.wait_for_selector("#buttons button.label:not([disabled])")
        qid = page.get_attribute("#card", "data-query-id")
        text = page.text_content("#item-text")
        assert text in texts  # the literal text, markup and all
        shown.add(text)
        assert page.evaluate("typeof window.__xss") == "undefined"
        page.click("#buttons button[data-label='funny']")
        page.wait_for_function("q => document.getElementById('card').dataset.queryId !== q", arg=qid)
    assert len(shown) >= 3
    assert page.evaluate(NO_INJECTED) == 0
    page.clock.resume()  # the context's clock: time flows again for the dashboard (its polls are timers)
    dash = ctx.new_page()
    dash.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    dash.goto(f"{srv.url}/dashboard/{eid}#token={token}")
    dash.wait_for_function("document.getElementById('n-answers').textContent === '10'")
    cells = dash.locator("#ranking tbody td.text").all_text_contents()
    assert set(cells) == texts
    assert dash.text_content("#title") == "<script>window.__xss=1</script><img src=x onerror=window.__xss=1>"
    assert dash.evaluate("typeof window.__xss") == "undefined"
    assert dash.evaluate(NO_INJECTED) == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert dialogs == []
    ctx.close()
