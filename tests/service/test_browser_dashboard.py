"""The owner dashboard in a real headless Chromium under the service's Content-Security-Policy (issue #21):
only the token form until a token is accepted, readable algorithm settings, no horizontal overflow on a
phone, interval numbers clipped to the reward range.

Screenshots go to /tmp/dash_shots/ (390 px phone and 1280 px desktop) for a look by eye.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.browser

SHOTS = Path("/tmp/dash_shots")
LONG_WORD = "Supercalifragilisticexpialidocious" + "x" * 26  # 60 characters, no break opportunity
assert len(LONG_WORD) == 60
ITEMS = [
    f"{LONG_WORD} said the parrot",
    "I told you the elevator was for people only, and now look at what happened to the plants.",
    "He says he's between aquariums right now.",
    "Let's just say the merger went swimmingly.",
    "Honestly, the commute is the best part of working underwater all week long.",
    "Per my last email: glub.",
]
LABELS = [{"name": "bad", "reward": 0.0}, {"name": "ok", "reward": 0.5}, {"name": "good", "reward": 1.0}]
LEARNERS = [{"label": "KL", "algorithm": "kl_rand_lucb", "params": {"k": 1, "delta": 0.025}},
            {"label": "LUCB", "algorithm": "lucb1", "params": {"k": 1, "delta": 0.1}},  # bounds beyond [0, 1]
            {"label": "Budget", "algorithm": "successive_rejects", "params": {"k": 1, "budget": 300}}]
SCROLL_WIDTH = "document.documentElement.scrollWidth"
# words of the item texts (in the ranking cards) that the browser split over two lines
SPLIT_WORDS = """() => {
  const out = [];
  document.querySelectorAll('#ranking td.text').forEach((td) => {
    const node = td.firstChild;
    if (!node) return;
    const re = /\\S+/g; let m;
    while ((m = re.exec(node.textContent))) {
      const r = document.createRange();
      r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
      const tops = new Set(Array.from(r.getClientRects()).map((q) => Math.round(q.top)));
      if (tops.size > 1) out.push(m[0]);
    }
  });
  return out;
}"""


def create(url: str) -> tuple[int, str]:
    r = httpx.post(f"{url}/api/experiments", json={"name": "dashboard layout", "items": ITEMS, "labels": LABELS,
                                                   "algorithms": LEARNERS, "seed": 5})
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["owner_token"]


def answer(url: str, eid: int, n: int) -> None:
    """n answers from fresh participants through the API (labels cycle through good, ok, bad)."""
    names = [lab["name"] for lab in LABELS]
    for i in range(n):
        pid = httpx.post(f"{url}/api/participants").json()["participant_id"]
        q = httpx.post(f"{url}/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["state"] == "ok", q
        r = httpx.post(f"{url}/api/queries/{q['query_id']}/answer",
                       json={"participant_id": pid, "label": names[i % 3]})
        assert r.status_code == 200, r.text


def assert_only_the_form(page) -> None:
    assert page.is_visible("#token-form")
    for sel in ("#dash-body", "#controls", "#pause", "#resume", "#stop", "#export-answers", "#export-summary",
                "#ranking", "#learner-settings", ".stats"):
        assert page.is_hidden(sel), sel


@pytest.fixture
def served(server_cls, tmp_path):
    with server_cls(f"sqlite:///{tmp_path / 'dash.sqlite'}", log_dir=tmp_path) as srv:
        eid, token = create(srv.url)
        answer(srv.url, eid, 18)
        yield srv.url, eid, token


def test_dashboard_shows_only_the_token_form_until_a_token_is_accepted(browser, served):
    from playwright.sync_api import expect

    url, eid, token = served
    ctx = browser.new_context(bypass_csp=False, viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # no token: the form alone, no empty widgets and no live-looking buttons
    page.goto(f"{url}/dashboard/{eid}")
    page.wait_for_selector("#token-form:not([hidden])")
    assert_only_the_form(page)
    assert "owner token" in page.text_content("#error")
    # a wrong token: still only the form, with an error
    page.fill("#token-input", "wrong-token")
    page.click("#token-form button[type=submit]")
    expect(page.locator("#error")).to_have_text("Invalid owner token.")
    page.wait_for_selector("#token-form:not([hidden])")
    assert_only_the_form(page)
    # the right token: everything appears, with the learners' settings in words
    page.fill("#token-input", token)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#n-answers")).not_to_have_text("0")
    page.wait_for_selector("#learner-settings .learner-card[data-label='Budget']")
    for sel in ("#dash-body", "#controls", "#pause", "#resume", "#stop", "#ranking", "#learner-settings"):
        assert page.is_visible(sel), sel
    assert page.is_hidden("#token-form")
    kl = page.text_content("#learner-settings .learner-card[data-label='KL']")
    assert "kl_rand_lucb" in kl and "delta = 0.025" in kl and "k = 1" in kl
    assert "Jiang, Li, Qiao 2017" in kl  # the paper
    assert "error probability delta = 0.025" in kl and "{" not in kl
    budget = page.text_content("#learner-settings .learner-card[data-label='Budget']")
    assert "Audibert, Bubeck, Munos" in budget and "stops after budget = 300 answers" in budget.lower()
    assert "{" not in page.text_content("#algorithm") + page.text_content("#comparison-table")
    # each parameter on its own line
    lines = page.locator("#learner-settings .learner-card[data-label='KL'] ul.params li").all_text_contents()
    assert lines == ["k = 1", "delta = 0.025"]
    # a 401 later (the token changed): back to the form
    page.route("**/api/experiments/*/results*", lambda route: route.fulfill(status=401, body="{}"))
    page.wait_for_selector("#token-form:not([hidden])")
    assert_only_the_form(page)
    assert page.text_content("#error") == "Invalid owner token."
    assert errors == []
    ctx.close()


def check_interval_cells(page) -> list[str]:
    """Every interval cell: a title and a text with numbers inside the reward range [0, 1]; the texts."""
    cells = page.locator("#ranking td.interval")
    assert cells.count() == len(ITEMS)
    shown = []
    for i in range(cells.count()):
        title = cells.nth(i).get_attribute("title")
        assert title and "interval [" in title and "reward range 0.00 to 1.00" in title, title
        nums = [float(x) for x in re.findall(r"-?\d+\.\d+", title)]
        assert nums and all(0.0 <= x <= 1.0 for x in nums), title
        text = cells.nth(i).locator(".ci-text").text_content()
        assert re.fullmatch(r"\[(–|(≤ )?\d\.\d\d), (–|(≥ )?\d\.\d\d)\]", text), text
        assert all(0.0 <= float(x) <= 1.0 for x in re.findall(r"\d+\.\d+", text)), text
        shown.append(text)
    return shown


def test_dashboard_fits_a_phone_and_shows_interval_numbers(browser, served):
    from playwright.sync_api import expect

    url, eid, token = served
    SHOTS.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(bypass_csp=False, viewport={"width": 390, "height": 844}, device_scale_factor=2,
                              is_mobile=True, has_touch=True)
    page = ctx.new_page()
    page.goto(f"{url}/dashboard/{eid}#token={token}")
    expect(page.locator("#ranking tbody tr")).to_have_count(len(ITEMS))
    page.wait_for_selector("#learner-settings .learner-card")
    page.wait_for_timeout(600)  # the progress bar's transition
    assert page.evaluate(SCROLL_WIDTH) <= 390
    assert page.evaluate(SPLIT_WORDS) in ([], [LONG_WORD])  # only the unbreakable 60-character word may wrap
    texts = page.locator("#ranking td.text").all_text_contents()
    assert any(LONG_WORD in t for t in texts)
    page.screenshot(path=str(SHOTS / "dashboard-390.png"), full_page=True)
    # the interval cells: numbers inside the reward range [0, 1], in the title and the cell
    check_interval_cells(page)
    # LUCB1's sub-Gaussian bounds reach beyond [0, 1]: clipped, and marked as clipped
    page.click("#learner-tabs button.tab[data-label='LUCB']")
    expect(page.locator("#algorithm")).to_have_text("LUCB · lucb1")
    page.wait_for_timeout(300)
    shown = check_interval_cells(page)
    assert any("≤ 0.00" in t or "≥ 1.00" in t for t in shown), shown
    assert any("below 0.00" in (page.locator("#ranking td.interval").nth(i).get_attribute("title") or "")
               or "above 1.00" in (page.locator("#ranking td.interval").nth(i).get_attribute("title") or "")
               for i in range(len(ITEMS)))
    assert page.evaluate(SCROLL_WIDTH) <= 390
    page.screenshot(path=str(SHOTS / "dashboard-390-lucb.png"), full_page=True)
    # the other learner's tab on the phone: still no horizontal scrolling
    page.click("#learner-tabs button.tab[data-label='Budget']")
    expect(page.locator("#algorithm")).to_have_text("Budget · successive_rejects")
    page.wait_for_timeout(300)
    assert page.evaluate(SCROLL_WIDTH) <= 390
    ctx.close()

    desk = browser.new_context(bypass_csp=False, viewport={"width": 1280, "height": 900})
    page = desk.new_page()
    page.goto(f"{url}/dashboard/{eid}#token={token}")
    expect(page.locator("#ranking tbody tr")).to_have_count(len(ITEMS))
    page.wait_for_selector("#learner-settings .learner-card")
    page.wait_for_timeout(600)
    assert page.evaluate(SCROLL_WIDTH) <= 1280
    assert page.evaluate(SPLIT_WORDS) == []  # wide enough for every word, the long one included
    assert page.is_visible("#ranking thead")  # a table on wide screens
    page.screenshot(path=str(SHOTS / "dashboard-1280.png"), full_page=True)
    page.goto(f"{url}/dashboard/{eid}")
    desk.close()


def test_dashboard_says_so_when_the_network_drops_an_action(browser, served):
    """With the network cut, Pause and an export say they were not done (no uncaught error); once it is back,
    the message goes and Pause works."""
    from playwright.sync_api import expect

    url, eid, token = served
    ctx = browser.new_context(bypass_csp=False, viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/dashboard/{eid}#token={token}")
    expect(page.locator("#n-answers")).not_to_have_text("0")
    ctx.set_offline(True)
    page.click("#pause")
    expect(page.locator("#action-error")).to_contain_text("pause was not done")
    page.click("#export-answers")
    expect(page.locator("#action-error")).to_contain_text("the export was not done")
    ctx.set_offline(False)
    page.click("#pause")
    expect(page.locator("#action-error")).to_have_text("")
    expect(page.locator("#status")).to_have_text("paused")
    assert errors == []
    ctx.close()
