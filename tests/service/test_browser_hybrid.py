"""A staged experiment's page (ratings then comparisons, issue 39 item 4) in a real headless Chromium: the page rates
with its label buttons until stage 1 reaches its ratings budget, then shows two captions side by side without a
reload; a rating held across the switch is still answered and stored.

Driven by Playwright through the ``browser`` fixture on the module's ``shared_server``.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import HTTP

pytestmark = pytest.mark.browser

ITEMS = [{"id": f"c{i}", "text": f"Caption number {i}"} for i in range(6)]

# the next item on screen with its buttons taking answers: "rating" or "pair", or "idle" (nothing more to do)
NEXT = """() => {
  if (document.querySelector('main').classList.contains('idle')) return 'idle';
  const n = Number(document.getElementById('card').dataset.shown || 0);
  if (n <= (window.__waited || 0)) return false;
  if (document.querySelectorAll('#buttons button.side:not([disabled])').length === 2) {
    window.__waited = n;
    return 'pair';
  }
  if (document.querySelectorAll('#buttons button.label:not(.side):not([disabled])').length === 3) {
    window.__waited = n;
    return 'rating';
  }
  return false;
}"""


def test_the_page_moves_from_ratings_to_comparisons_without_a_reload(shared_server, browser):
    srv = shared_server
    spec = {"name": "staged page test", "items": ITEMS, "query": "rating_then_pairwise", "top_m": 3,
            "ratings_budget": 4, "seed": 2}
    r = HTTP.post(f"{srv.url}/api/experiments", json=spec)
    assert r.status_code == 201, r.text
    eid, auth = r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}
    ctx = browser.new_context(viewport={"width": 1000, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    loads: list[Any] = []
    page.on("load", lambda _: loads.append(1))
    page.goto(f"{srv.url}/rate/{eid}")
    page.evaluate("() => { window.__same_page = true; }")
    kinds = []
    for _ in range(12):
        kind = page.wait_for_function(NEXT).json_value()
        kinds.append(kind)
        if kind == "idle":
            break
        if kind == "pair":
            assert page.locator("#question").is_visible()
            page.keyboard.press("ArrowLeft")
            if kinds.count("pair") == 3:
                break
        else:
            page.keyboard.press("3")
    assert "rating" in kinds and kinds.count("pair") == 3, kinds
    assert kinds.index("pair") > kinds.index("rating")
    assert "rating" not in kinds[kinds.index("pair"):], "no rating after the first pair"
    assert page.evaluate("() => window.__same_page === true") and len(loads) == 1  # no reload
    page.wait_for_function("() => Number(document.getElementById('n-rated').textContent) === "
                           f"{len([k for k in kinds if k != 'idle'])}")  # the count goes on across the switch
    ctx.close()
    res = HTTP.get(f"{srv.url}/api/experiments/{eid}/results", headers=auth).json()
    assert res["stages"]["stage"] == 2 and res["stages"]["stage1"]["reason"] == "ratings_budget"
    assert res["n_answers"] == kinds.count("rating")  # every rating stored, one held across the switch too
    child = res["stages"]["stage2_experiment_id"]
    pairs = HTTP.get(f"{srv.url}/api/experiments/{child}/results", headers=auth).json()
    assert pairs["n_answers"] == 3
    assert not errors, errors
