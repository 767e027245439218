"""The dashboard of a staged experiment (ratings then comparisons, issue 39 item 4) in a real headless Chromium: its
Stages section says which stage runs, lists stage 1's top m by text and says plainly that they were taken at the
ratings budget (not proven), shows stage 2's Borda ranking and Bradley-Terry strengths, and the winner once stage 2
has stopped; a 375 px phone shows it without sideways scrolling.

The experiment is driven through the JSON API (as tests/service/test_hybrid_stages.py does); the dashboard is read by
Playwright through the ``browser`` fixture on the module's ``shared_server``. Screenshots go to tmp_path and are
copied to /tmp/stagesdash/.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import HTTP

pytestmark = pytest.mark.browser

ITEMS = [{"id": f"c{i}", "text": f"Caption number {i}: a fairly long caption that has to wrap on a phone"}
         for i in range(6)]
INDEX = {item["id"]: i for i, item in enumerate(ITEMS)}
TOP = {"c0", "c1", "c2"}
SHOTS = Path("/tmp/stagesdash")


def answer_for(q: dict[str, Any]) -> str:
    """A simulated participant: c0..c2 are funny, the others not; of two items the lower index wins."""
    if "items" in q:
        left, right = (INDEX[item["id"]] for item in q["items"])
        return "left" if left < right else "right"
    return "funny" if INDEX[q["item"]["id"]] < 3 else "unfunny"


def drive(c: httpx.Client, eid: int, until: str, limit: int = 3000) -> int:
    """Sessions of 5 answers until the first comparison is asked (``until="pairwise"``, it is given back) or the
    experiment says it is done (``until="done"``); returns how many answers were given."""
    n = 0
    while True:
        pid = c.post("/api/participants").json()["participant_id"]
        for _ in range(5):
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            if q["state"] != "ok":
                assert q["state"] == until, q
                return n
            if until == "pairwise" and "items" in q:
                c.post(f"/api/queries/{q['query_id']}/release", json={"participant_id": pid})
                return n
            r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": answer_for(q)})
            assert r.status_code == 200, r.text
            n += 1
            assert n < limit, "the experiment should have stopped long before"


def open_dashboard(browser: Any, url: str, **context_args: Any) -> tuple[Any, Any, list[str]]:
    ctx = browser.new_context(**{"viewport": {"width": 1280, "height": 900}, **context_args})
    page = ctx.new_page()
    page.set_default_timeout(20000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return ctx, page, errors


def test_the_stages_section_follows_a_staged_experiment_to_its_winner(browser, shared_server, tmp_path):
    srv = shared_server
    spec = {"name": "staged dashboard test", "items": ITEMS, "query": "rating_then_pairwise", "top_m": 3,
            "ratings_budget": 24, "seed": 5}
    r = HTTP.post(f"{srv.url}/api/experiments", json=spec)
    assert r.status_code == 201, r.text
    eid, token = r.json()["id"], r.json()["owner_token"]
    auth = {"Authorization": f"Bearer {token}"}
    ctx, page, errors = open_dashboard(browser, f"{srv.url}/dashboard/{eid}#token={token}")

    # stage 1 runs: the section says so and lists its learner's current top 3, not as final
    page.wait_for_selector("#stages-section:not([hidden])")
    assert "Stage 1 of 2 is running" in page.text_content("#stage-now")
    assert "not final" in page.text_content("#stage1-text")
    assert page.locator("#stage1-top li").count() == 3
    assert page.is_hidden("#stage2-box") and page.is_hidden("#stage-winner")

    with httpx.Client(base_url=srv.url, timeout=10) as c:
        assert drive(c, eid, "pairwise") == 24
        stages = c.get(f"/api/experiments/{eid}/results", headers=auth).json()["stages"]
        assert stages["stage"] == 2 and stages["stage1"]["reason"] == "ratings_budget"
        top = stages["stage1"]["top_m"]
        assert set(top) == TOP

        # stage 2 runs: stage 1's top 3 by text, said plainly to be unproven, and stage 2's tables
        page.wait_for_selector("#stages-section[data-stage='2']")
        assert "Stage 2 of 2 is running" in page.text_content("#stage-now")
        assert [page.get_attribute(f"#stage1-top li:nth-child({i + 1})", "data-id") for i in range(3)] == top
        assert page.text_content("#stage1-top li:first-child") == ITEMS[INDEX[top[0]]]["text"]
        text = page.text_content("#stage1-text")
        assert text.startswith("Not proven") and "ratings budget of 24 ratings" in text
        assert page.is_visible("#stage2-box")
        child = stages["stage2_experiment_id"]
        assert page.get_attribute("#stage2-link", "href") == f"/dashboard/{child}"
        assert page.is_hidden("#stage-winner")

        n = drive(c, eid, "done")
        assert n > 0
        res = c.get(f"/api/experiments/{eid}/results", headers=auth).json()
        assert res["stages"]["winner"] == "c0" and res["stages"]["proven"] is False

    # stage 2 stopped: the winner by its text, with the caveat of an unproven stage 1; the Borda ranking and the
    # Bradley-Terry strengths have c0 first
    page.wait_for_selector("#stage-winner:not([hidden])")
    winner = page.text_content("#stage-winner")
    assert winner.startswith("Winner: " + ITEMS[0]["text"]) and "not proven" in winner
    assert "Both stages are done" in page.text_content("#stage-now")
    assert f"{n} comparisons; its learner has stopped" in page.text_content("#stage2-text")
    # the tables are refetched at most every 5 s: wait for the fetch after the last comparison
    page.wait_for_function("() => ['s2-ranking', 's2-bt-table'].every((t) => { "
                           "const rows = document.querySelectorAll(`#${t} tbody tr`); "
                           "return rows.length === 3 && rows[0].dataset.id === 'c0'; })")
    assert "comparisons; the comparison graph is" in page.text_content("#s2-bt-summary")
    assert page.is_hidden("#pairwise-section")  # the parent's own view stays the rating one
    SHOTS.mkdir(exist_ok=True)
    shot = tmp_path / "stages-desktop.png"
    page.locator("#stages-section").screenshot(path=str(shot))
    shutil.copy(shot, SHOTS / shot.name)
    assert errors == []

    # stage 2's own dashboard (the link, with the same token) says whose stage it is
    page.click("#stage2-link")
    page.wait_for_selector("#stages-section:not([hidden])")
    assert f"of experiment {eid}" in page.text_content("#stage-now") and page.is_hidden("#stage-detail")
    assert page.is_visible("#pairwise-section")
    assert errors == []
    ctx.close()

    # a phone: the whole section without sideways scrolling
    ctx, page, errors = open_dashboard(browser, f"{srv.url}/dashboard/{eid}#token={token}",
                                       viewport={"width": 375, "height": 800}, device_scale_factor=2,
                                       is_mobile=True, has_touch=True)
    page.wait_for_selector("#stage-winner:not([hidden])")
    page.wait_for_selector("#s2-bt-table tbody tr")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    box = page.locator("#stages-section").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 375
    shot = tmp_path / "stages-phone.png"
    page.locator("#stages-section").screenshot(path=str(shot))
    shutil.copy(shot, SHOTS / shot.name)
    assert errors == []
    ctx.close()
