"""A pairwise experiment's page in a real headless Chromium (issue 39): two captions side by side on a desktop and
stacked on a phone, answered with the Left / Right arrow keys (and 1 / 2) until the learner stops on the Borda
winner; an answer whose request is cut is sent again and counted once.

The system Chromium (/usr/bin/chromium) is driven by Playwright through the ``browser`` fixture; the tests share one
``purebandits serve`` per module (``shared_server``), each on experiments of its own made through the JSON API.
"""

from __future__ import annotations

import base64
import csv
import io
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser_support import let_arming_pass

from conftest import HTTP

pytestmark = pytest.mark.browser

#: caption i beats caption j whenever i < j: Borda scores 1, 2/3, 1/3, 0, so c0 is the Borda winner
CAPTIONS = [
    "I said a three-hour tour, not a three-year one.",
    "Technically we are still on the company retreat.",
    "Let's give the coconut another week to reply.",
    "At least the commute is short.",
]
ITEMS = [{"id": f"c{i}", "text": text} for i, text in enumerate(CAPTIONS)]
INDEX = {item["id"]: i for i, item in enumerate(ITEMS)}

# one more pair shown (#card's data-shown counts them) than at the last wait, its two buttons taking answers, or
# the page idle (no more pairs for this participant): "ready" / "idle"
NEXT = """() => {
  if (document.querySelector('main').classList.contains('idle')) return 'idle';
  const n = Number(document.getElementById('card').dataset.shown || 0);
  if (n <= (window.__waited || 0) || document.querySelectorAll('#buttons button.side:not([disabled])').length !== 2)
    return false;
  window.__waited = n;
  return 'ready';
}"""


class Exp:
    """A pairwise experiment on a running server, with its owner token."""

    def __init__(self, srv: Any, **spec: Any) -> None:
        spec = {"name": "pairwise page test", "items": ITEMS, "query": "pairwise", "seed": 3, **spec}
        r = HTTP.post(f"{srv.url}/api/experiments", json=spec)
        assert r.status_code == 201, r.text
        self.url, self.id, token = srv.url, r.json()["id"], r.json()["owner_token"]
        self.auth = {"Authorization": f"Bearer {token}"}

    def results(self) -> dict[str, Any]:
        return HTTP.get(f"{self.url}/api/experiments/{self.id}/results", headers=self.auth).json()

    def answers(self) -> list[dict[str, str]]:
        r = HTTP.get(f"{self.url}/api/experiments/{self.id}/answers.csv", headers=self.auth)
        assert r.status_code == 200
        return list(csv.DictReader(io.StringIO(r.text)))


def open_page(browser: Any, url: str, fake_clock: bool = False, **context_args: Any) -> tuple[Any, Any, list[str]]:
    ctx = browser.new_context(**{"viewport": {"width": 1000, "height": 800}, **context_args})
    page = ctx.new_page()
    page.set_default_timeout(15000)
    if fake_clock:  # the page's timers move when the test says (browser_support.let_arming_pass)
        page.clock.install()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))  # also unhandled promise rejections
    page.goto(url)
    return ctx, page, errors


def next_pair(page: Any) -> str:
    """Wait for the next pair with enabled buttons ("ready") or for the page to have no more ("idle")."""
    return page.wait_for_function(NEXT).json_value()


def shown(page: Any) -> tuple[str, str, str]:
    """The query on screen: its id and the left and right items' ids."""
    left, right = (page.get_attribute(f"#buttons button[data-label='{side}']", "data-item-id")
                   for side in ("left", "right"))
    return page.get_attribute("#card", "data-query-id"), left, right


def preferred(left: str, right: str) -> str:
    """The simulated participant's answer: the caption with the lower index wins."""
    return "left" if INDEX[left] < INDEX[right] else "right"


def test_pairwise_page_runs_to_the_borda_winner_with_the_arrow_keys(browser, shared_server):
    """Answering every pair with the keys (the arrows, now and then 1 and 2) until the page says the experiment has
    found its answer: the learner stopped on c0, every answer is stored once with the side that was chosen."""
    srv = shared_server
    exp = Exp(srv, delta=0.1)
    public = HTTP.get(f"{srv.url}/api/experiments/{exp.id}/public").json()
    assert public["query"] == "pairwise" and public["labels"] == ["left", "right"]
    # the page's clock is the test's: each pair's buttons are armed after 250 ms of the page's time, passed at
    # once (a hundred-odd answers would wait half a minute of real time for it)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}", fake_clock=True)
    given: dict[str, str] = {}  # query id -> label
    while True:
        let_arming_pass(page)
        if next_pair(page) != "ready":
            break
        qid, left, right = shown(page)
        assert qid not in given and left != right and {left, right} <= set(INDEX)
        texts = [page.text_content(f"#buttons button[data-label='{side}'] .name") for side in ("left", "right")]
        assert texts == [CAPTIONS[INDEX[left]], CAPTIONS[INDEX[right]]]
        label = preferred(left, right)
        key = {"left": "ArrowLeft", "right": "ArrowRight"}[label]
        if len(given) % 5 == 4:
            key = {"left": "1", "right": "2"}[label]
        page.keyboard.press(key)
        given[qid] = label
        assert len(given) < 400, "the learner should have stopped long before"
    page.clock.resume()  # the page's timers (retries, polls) run in real time again for the waits below
    assert "found its answer" in page.text_content("#item-text")
    assert page.is_hidden("#buttons") and page.is_hidden("#question")
    page.wait_for_selector("#unsent", state="hidden")
    res = exp.results()
    assert res["done"] and [r["id"] for r in res["recommendation"]] == ["c0"]
    assert res["n_answers"] == len(given)
    assert page.text_content("#n-rated") == str(len(given))
    answers = exp.answers()
    assert {a["query_id"]: a["label"] for a in answers} == given and len(answers) == len(given)
    assert all(a["winner_id"] == min(a["left_id"], a["right_id"], key=INDEX.get) for a in answers)
    assert page.is_hidden("#lost")
    assert errors == []
    ctx.close()


def test_an_answer_whose_request_is_cut_is_sent_again_and_counted_once(browser, shared_server):
    """Two answers meet a cut network: the first never reaches the server, the second is stored but its response is
    lost. Both are sent again by themselves (the page goes on with the next pair meanwhile) and each is stored
    once, with the side chosen."""
    srv = shared_server
    exp = Exp(srv, delta=0.1)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}")
    calls: list[dict[str, Any]] = []

    def cut_twice(route: Any) -> None:
        calls.append({"url": route.request.url, **route.request.post_data_json})
        if len(calls) == 1:
            route.abort("internetdisconnected")  # never reaches the server
        elif len(calls) == 3:
            route.fetch()  # the server stores it, the page sees the connection drop
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/queries/*/answer", cut_twice)
    given: dict[str, str] = {}
    for _ in range(3):
        assert next_pair(page) == "ready"
        qid, left, right = shown(page)
        label = preferred(left, right)
        page.keyboard.press({"left": "ArrowLeft", "right": "ArrowRight"}[label])
        given[qid] = label
    page.wait_for_selector("#unsent", state="hidden")
    page.wait_for_function("document.getElementById('n-rated').textContent === '3'")
    first, second, _ = given
    assert [c["url"].split("/")[-2] for c in calls[:4]] == [first, first, second, second]
    assert all(c["label"] == given[c["url"].split("/")[-2]] for c in calls)
    answers = exp.answers()
    assert sorted((a["query_id"], a["label"]) for a in answers) == sorted(given.items())
    assert exp.results()["n_answers"] == 3
    assert page.is_hidden("#lost")
    assert errors == []
    ctx.close()


def cartoon_png() -> bytes:
    """A small cartoon-like picture (sea, an island, a palm tree) as the experiment's context image."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (900, 540), "#fdfcf7")
    d = ImageDraw.Draw(img)
    for y in (420, 450, 480):
        d.line([(40, y), (860, y)], fill="#88aaaa", width=3)
    d.ellipse([(220, 350), (680, 450)], fill="#f1e3b5", outline="#222222", width=4)
    d.line([(470, 390), (490, 260), (520, 160), (540, 100)], fill="#222222", width=7)
    for dx, dy in ((-120, 50), (-90, -30), (100, -20), (120, 60), (20, -80)):
        d.line([(540, 100), (540 + dx, 100 + dy)], fill="#222222", width=5)
    d.ellipse([(760, 60), (860, 160)], outline="#222222", width=3)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


INSTRUCTIONS = "Which caption is funnier?"
LONG = "Nobody told me the all-inclusive package did not include a boat back, or a schedule, or other guests."


def test_pairwise_layout_on_a_phone_and_a_desktop(browser, shared_server, tmp_path):
    """A desktop shows the two captions side by side, a 375 px phone one above the other, both on the first screen,
    with no sideways scrolling; the experiment's instructions are the question. Screenshots go to tmp_path."""
    shots = tmp_path / "screenshots"
    shots.mkdir()
    items = [{"id": "c0", "text": LONG}, *ITEMS[1:]]
    srv = shared_server
    exp = Exp(srv, name="Caption contest: the island", items=items, instructions=INSTRUCTIONS, allow_skip=True,
              image={"content_type": "image/png", "data": base64.b64encode(cartoon_png()).decode()})
    sizes = {"phone": dict(viewport={"width": 375, "height": 800}, device_scale_factor=2, is_mobile=True,
                           has_touch=True),
             "desktop": dict(viewport={"width": 1280, "height": 900})}
    for name, args in sizes.items():
        ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}", **args)
        assert next_pair(page) == "ready"
        page.wait_for_function("document.getElementById('context-image').complete && "
                               "document.getElementById('context-image').naturalWidth > 0")
        time.sleep(0.3)  # the buttons' arming has passed: they are drawn as they will be answered
        assert page.text_content("#question") == INSTRUCTIONS and page.is_hidden("#instructions")
        assert page.is_visible("#buttons button.skip")
        width, height = args["viewport"]["width"], args["viewport"]["height"]
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        left, right = (page.locator(f"#buttons button[data-label='{side}']").bounding_box()
                       for side in ("left", "right"))
        for box in (left, right):  # whole on the first screen
            assert box["x"] >= 0 and box["x"] + box["width"] <= width
            assert box["y"] >= 0 and box["y"] + box["height"] <= height
        if name == "desktop":  # side by side, the same height
            assert left["x"] + left["width"] < right["x"] and abs(left["y"] - right["y"]) < 1
        else:  # stacked, each the page's width
            assert right["y"] >= left["y"] + left["height"] and left["width"] > 0.8 * width
        page.screenshot(path=str(shots / f"pairwise-{name}.png"))
        assert errors == []
        ctx.close()
    for name in ("pairwise-phone.png", "pairwise-desktop.png"):
        assert (shots / name).stat().st_size > 1000


def pending(exp: Exp) -> int:
    """Pulls the experiment's learner counts as out (its state's ``pending_``)."""
    r = HTTP.get(f"{exp.url}/api/experiments/{exp.id}/state", headers=exp.auth)
    return sum(r.json()["state"]["state"]["pending_"]["__ndarray__"])


def test_completion_code_and_pairs_given_back_when_the_page_closes(browser, shared_server):
    """The session's end works as on a rating page: after ``answers_per_participant`` comparisons the completion
    code is shown; a page that closes gives back the pair on screen and the one fetched ahead."""
    srv = shared_server
    short = Exp(srv, answers_per_participant=2)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{short.id}")
    for _ in range(2):
        assert next_pair(page) == "ready"
        page.keyboard.press("ArrowRight")
    assert next_pair(page) == "idle"
    page.wait_for_selector("#complete", state="visible")
    assert page.text_content("#completion-code").strip()
    assert "comparisons we asked of you" in page.text_content("#item-text")
    assert [a["label"] for a in short.answers()] == ["right", "right"]
    assert errors == []
    ctx.close()

    exp = Exp(srv)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}")
    assert next_pair(page) == "ready"
    page.keyboard.press("1")
    assert next_pair(page) == "ready"
    page.wait_for_selector("#unsent", state="hidden")
    deadline = time.monotonic() + 15
    while pending(exp) != 2:  # the pair on screen and the one fetched ahead
        assert time.monotonic() < deadline
        page.wait_for_timeout(50)
    page.goto("about:blank")
    while pending(exp) != 0:
        assert time.monotonic() < deadline + 15
        time.sleep(0.05)
    assert [a["label"] for a in exp.answers()] == ["left"]
    assert errors == []
    ctx.close()


def test_dashboard_of_a_pairwise_experiment(browser, shared_server, tmp_path):
    """The dashboard names the ranking's mean the Borda score and shows the Bradley-Terry strengths (c0 first, the
    graph's connectivity) with the win matrix and crowd-kit pairs as downloads."""
    srv = shared_server
    exp = Exp(srv)
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        pid = c.post("/api/participants").json()["participant_id"]
        for _ in range(24):
            q = c.post(f"/api/experiments/{exp.id}/queries", json={"participant_id": pid}).json()
            assert q["state"] == "ok"
            label = preferred(*(item["id"] for item in q["items"]))
            r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
            assert r.status_code == 200
    token = exp.auth["Authorization"].split()[1]
    ctx, page, errors = open_page(browser, f"{srv.url}/dashboard/{exp.id}#token={token}",
                                  viewport={"width": 1280, "height": 1000})
    page.wait_for_selector("#bt-table tbody tr")
    assert page.is_visible("#pairwise-section")
    assert [page.get_attribute(f"#bt-table tbody tr:nth-child({i})", "data-id") for i in (1, 4)] == ["c0", "c3"]
    assert "comparisons; the comparison graph is" in page.text_content("#bt-summary")
    assert "Borda score" in page.text_content("#ranking thead") + page.text_content("#ranking-note")
    with page.expect_download() as download:
        page.click("#export-wins")
    assert download.value.suggested_filename == f"experiment-{exp.id}-wins.csv"
    with page.expect_download() as download:
        page.click("#export-pairs")
    lines = (Path(download.value.path()).read_text()).splitlines()
    assert lines[0] == "worker,left,right,label" and len(lines) == 25
    page.locator("#pairwise-section").screenshot(path=str(tmp_path / "pairwise-dashboard.png"))
    assert errors == []
    ctx.close()
