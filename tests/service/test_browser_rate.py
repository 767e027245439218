"""The rating page in a real headless Chromium: answers survive network trouble, keyboard, crowd-work ids, context.

The system Chromium (/usr/bin/chromium) is driven by Playwright, as in ``test_browser.py``; the tests share
one ``purebandits serve`` on a SQLite file (``shared_server``: the network trouble is the browser's, the server
never fails), and each creates an experiment of its own through the JSON API.
"""

from __future__ import annotations

import base64
import csv
import io
import os
import re
import shutil
import time
from pathlib import Path

import httpx
import pytest

from conftest import HTTP

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
LABELS = ["unfunny", "somewhat funny", "funny"]  # the default label set, in button order
CAPTIONS = [
    "I said a three-hour tour, not a three-year one.",
    "The Wi-Fi is terrible, but the view makes up for it.",
    "Technically we are still on the company retreat.",
    "Let's give the coconut another week to reply.",
    "My therapist said I needed more space.",
    "On the bright side, nobody can reach us for a meeting.",
    "It's not a desert island if you've brought a laptop.",
    "I miss the days when this was only a metaphor.",
    "We should have read the reviews more carefully.",
    "At least the commute is short.",
]

pytestmark = pytest.mark.browser

# every text the status line (#message) shows, with whether all rating buttons were disabled then
WATCH_MESSAGES = """
window.__messages = [];
document.addEventListener("DOMContentLoaded", () => {
  const m = document.getElementById("message");
  if (!m) return;
  new MutationObserver(() => {
    const buttons = Array.from(document.querySelectorAll("#buttons button"));
    window.__messages.push({text: m.textContent, disabled: buttons.length > 0 && buttons.every((b) => b.disabled)});
  }).observe(m, {childList: true, characterData: true, subtree: true});
});
"""

# one more item shown (#card's data-shown counts them) than at the last successful wait, its buttons
# taking answers; the server may show a pending query again, so its query id need not change
READY = """() => {
  const n = Number(document.getElementById('card').dataset.shown || 0);
  if (n <= (window.__waited || 0) || !document.querySelector('#buttons button.label:not([disabled])')) return false;
  window.__waited = n;
  return true;
}"""


class Exp:
    """An experiment on a running server, with its owner token."""

    def __init__(self, srv, **spec):
        spec = {"name": "rating page test", "items": CAPTIONS, "seed": 3, **spec}
        r = HTTP.post(f"{srv.url}/api/experiments", json=spec)
        assert r.status_code == 201, r.text
        self.url, self.id, token = srv.url, r.json()["id"], r.json()["owner_token"]
        self.auth = {"Authorization": f"Bearer {token}"}

    def results(self) -> dict:
        return HTTP.get(f"{self.url}/api/experiments/{self.id}/results", headers=self.auth).json()

    def answers(self) -> list[dict]:
        r = HTTP.get(f"{self.url}/api/experiments/{self.id}/answers.csv", headers=self.auth)
        assert r.status_code == 200
        return list(csv.DictReader(io.StringIO(r.text)))


#: the page's prefetch tuned deeper than its default (one item ahead): five new items per ask, refilled when
#: fewer than two wait, so that a test has fetched items to rate offline or to see expire together
DEEP_PREFETCH = "window.__purebanditsRate = Object.assign(window.__purebanditsRate || {}, {batch: 5, lowWater: 2});"


def open_page(browser, url: str, deep: bool = False, **context_args):
    ctx = browser.new_context(**{"viewport": {"width": 900, "height": 900}, **context_args})
    if deep:
        ctx.add_init_script(DEEP_PREFETCH)
    page = ctx.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))  # also unhandled promise rejections
    page.add_init_script(WATCH_MESSAGES)
    page.goto(url)
    return ctx, page, errors


def next_item(page) -> str:
    """Wait for the next item (one more shown than at the last call) with enabled buttons; its query id."""
    page.wait_for_function(READY)
    return page.get_attribute("#card", "data-query-id")


def all_disabled(page) -> bool:
    return page.evaluate("Array.from(document.querySelectorAll('#buttons button')).every(b => b.disabled)")


def retry_messages(page) -> list[dict]:
    return [m for m in page.evaluate("window.__messages") if "retrying" in m["text"]]


def wait_until(page, condition, timeout: float = 15) -> None:
    """Let the page run (and Playwright deliver its events) until ``condition()`` holds on the test's side."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        page.wait_for_timeout(50)


def test_answer_given_offline_is_retried_and_counted_once(browser, shared_server):
    srv = shared_server
    exp = Exp(srv)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}", deep=True)
    qid = next_item(page)
    assert page.evaluate("navigator.onLine")
    ctx.set_offline(True)
    page.click("#buttons button[data-label='funny']")
    nxt = next_item(page)  # the next item (fetched before) at once: the answer waits in the outbox
    assert nxt != qid
    page.wait_for_function("document.getElementById('message').textContent.includes('Connection lost, retrying')")
    time.sleep(2)  # several failed attempts: still retrying, nothing counted, nothing reported lost
    assert "Connection lost, retrying" in page.text_content("#message")
    assert page.text_content("#unsent") == "1 answer waiting to be sent"
    assert page.get_attribute("#card", "data-query-id") == nxt and not all_disabled(page)
    assert page.text_content("#n-rated") == "0"
    assert page.is_hidden("#lost")
    assert exp.results()["n_answers"] == 0
    # the retries went on while the participant could rate the next item
    assert any(not m["disabled"] for m in retry_messages(page))
    ctx.set_offline(False)  # the `online` event sends it again at once
    t0 = time.monotonic()
    page.wait_for_selector("#unsent", state="hidden")
    assert time.monotonic() - t0 < 5
    page.wait_for_function("document.getElementById('n-rated').textContent === '1'")
    assert "retrying" not in page.text_content("#message")
    assert page.is_hidden("#lost")
    assert exp.results()["n_answers"] == 1
    rows = exp.answers()
    assert [(r["query_id"], r["label"]) for r in rows] == [(qid, "funny")]
    # and the page goes on as usual
    page.click("#buttons button[data-label='unfunny']")
    next_item(page)
    page.wait_for_function("document.getElementById('n-rated').textContent === '2'")
    assert [(r["query_id"], r["label"]) for r in exp.answers()] == [(qid, "funny"), (nxt, "unfunny")]
    assert errors == []
    ctx.close()


def test_answer_still_failing_after_the_give_up_time_is_reported(browser, shared_server):
    """The page gives up on an answer after ~2 minutes (3 s here), reports it and goes on when back online."""
    srv = shared_server
    exp = Exp(srv)
    ctx = browser.new_context(viewport={"width": 900, "height": 900})
    ctx.add_init_script("window.__purebanditsRate = {answerGiveUpMs: 3000};")
    ctx.add_init_script(DEEP_PREFETCH)
    page = ctx.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{srv.url}/rate/{exp.id}")
    lost_qid = next_item(page)
    ctx.set_offline(True)
    page.click("#buttons button[data-label='funny']")
    qid = next_item(page)  # the next item at once
    assert page.text_content("#unsent") == "1 answer waiting to be sent"
    page.wait_for_selector("#lost:not([hidden])", timeout=8000)
    assert "1 answer could not be saved" in page.text_content("#lost")
    assert "connection" in page.text_content("#lost")
    assert page.is_hidden("#unsent")
    assert exp.results()["n_answers"] == 0
    ctx.set_offline(False)
    # the participant goes on; the server still holds the given-up query pending, so the page shows it
    # again when it asks for more items, to be rated again (it does not sit there until it expires)
    expected = []
    for _ in range(8):
        expected.append((qid, "unfunny"))
        page.click("#buttons button[data-label='unfunny']")
        qid = next_item(page)
        if qid == lost_qid:
            break
    assert qid == lost_qid
    page.click("#buttons button[data-label='somewhat funny']")
    expected.append((qid, "somewhat funny"))
    next_item(page)
    page.wait_for_function(f"document.getElementById('n-rated').textContent === '{len(expected)}'")
    assert "1 answer could not be saved" in page.text_content("#lost")
    assert [(r["query_id"], r["label"]) for r in exp.answers()] == expected
    assert errors == []
    ctx.close()


def test_answer_whose_response_is_lost_is_sent_again_and_counted_once(browser, shared_server):
    """The server commits the answer but the connection drops before the response: the repeat counts once."""
    srv = shared_server
    exp = Exp(srv)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}")
    calls = []

    def drop_first_response(route):
        calls.append(route.request.post_data_json)
        if len(calls) == 1:
            route.fetch()  # reaches the server, which commits the answer
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/queries/*/answer", drop_first_response)
    qid = next_item(page)
    page.click("#buttons button[data-label='somewhat funny']")
    next_item(page)  # at once, while the answer is on its way
    page.wait_for_selector("#unsent", state="hidden")
    assert len(calls) == 2 and calls[0] == calls[1]  # the same participant and label, sent again
    assert page.text_content("#n-rated") == "1"
    assert exp.results()["n_answers"] == 1
    assert [(r["query_id"], r["label"]) for r in exp.answers()] == [(qid, "somewhat funny")]
    assert page.is_hidden("#lost")
    assert errors == []
    ctx.close()


def test_answer_failing_with_503_is_retried_and_counted_once(browser, shared_server):
    srv = shared_server
    exp = Exp(srv)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}")
    calls = []
    busy = {"status": 503, "content_type": "application/json",
            "body": '{"detail": "database unavailable, retry shortly"}'}

    def fail_twice(route):
        calls.append((time.monotonic(), route.request.post_data_json))
        if len(calls) == 1:
            route.fetch()  # committed, yet the client sees a 503: the repeat must count once
            route.fulfill(**busy)
        elif len(calls) == 2:
            route.fulfill(**busy)
        else:
            route.continue_()

    page.route("**/api/queries/*/answer", fail_twice)
    qid = next_item(page)
    page.click("#buttons button[data-label='unfunny']")
    next_item(page)  # at once, while the answer is retried behind it
    page.wait_for_selector("#unsent", state="hidden")
    assert len(calls) == 3
    assert all(body == calls[0][1] for _, body in calls)
    gaps = [b[0] - a[0] for a, b in zip(calls, calls[1:], strict=False)]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4  # backoff: 0.5 s then 1 s, jittered down to half
    assert retry_messages(page)
    page.wait_for_function("!document.getElementById('message').textContent.includes('retrying')")
    assert page.text_content("#n-rated") == "1"
    assert exp.results()["n_answers"] == 1
    assert [(r["query_id"], r["label"]) for r in exp.answers()] == [(qid, "unfunny")]
    assert page.is_hidden("#lost")
    assert errors == []
    ctx.close()


def test_asks_are_retried_on_network_errors_and_5xx(browser, shared_server):
    srv = shared_server
    exp = Exp(srv)
    ctx = browser.new_context(viewport={"width": 900, "height": 900})
    page = ctx.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    calls = []

    def flaky(route):
        calls.append(time.monotonic())
        if len(calls) == 1:
            route.abort("connectionrefused")
        elif len(calls) == 2:
            route.fulfill(status=502, body="bad gateway")
        else:
            route.continue_()

    page.route("**/api/experiments/*/queries", flaky)
    page.goto(f"{srv.url}/rate/{exp.id}")
    next_item(page)
    assert len(calls) == 3
    page.click("#buttons button[data-label='funny']")
    next_item(page)
    assert exp.results()["n_answers"] == 1
    assert errors == []
    ctx.close()


def test_finally_lost_answers_are_reported_and_the_report_stays(browser, shared_server):
    srv = shared_server
    exp = Exp(srv)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}", deep=True)
    gone = {"status": 410, "content_type": "application/json", "body": '{"detail": "query expired"}'}
    page.route("**/api/queries/*/answer", lambda route: route.fulfill(**gone))
    next_item(page)
    page.click("#buttons button[data-label='funny']")
    next_item(page)  # the page moves on
    assert page.is_visible("#lost")
    assert "1 answer could not be saved" in page.text_content("#lost")
    assert page.get_attribute("#lost", "role") == "alert"
    page.keyboard.press("2")
    next_item(page)
    assert "2 answers could not be saved" in page.text_content("#lost")
    page.unroute("**/api/queries/*/answer")
    page.click("#buttons button[data-label='unfunny']")
    next_item(page)
    page.wait_for_function("document.getElementById('n-rated').textContent === '1'")
    time.sleep(0.3)
    assert page.is_visible("#lost")  # a saved answer and a new item do not clear the report
    assert "2 answers could not be saved" in page.text_content("#lost")
    assert exp.results()["n_answers"] == 1
    assert errors == []
    ctx.close()


def test_answer_to_a_really_expired_query_is_reported(browser, shared_server):
    """The item on screen expires, and so do the ones fetched with it: its answer is reported, and the page
    drops the others (it asks again, and the server no longer lists them) instead of losing their answers."""
    srv = shared_server
    exp = Exp(srv, query_expiry_seconds=3)
    ctx = browser.new_context(viewport={"width": 900, "height": 900})
    ctx.add_init_script(DEEP_PREFETCH)
    page = ctx.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    listed: list[list[str]] = []  # each ask's query ids

    def record(route):
        response = route.fetch()
        listed.append([q["query_id"] for q in response.json().get("queries") or []])
        route.fulfill(response=response)

    page.route("**/api/experiments/*/queries", record)
    page.goto(f"{srv.url}/rate/{exp.id}")
    next_item(page)
    assert len(listed[0]) == 5
    time.sleep(3.5)
    page.click("#buttons button[data-label='funny']")
    page.wait_for_selector("#lost:not([hidden])")
    assert "1 answer could not be saved" in page.text_content("#lost")
    assert "expired" in page.text_content("#lost")
    wait_until(page, lambda: len(listed) >= 2)  # the answer refused: the page asks again
    assert len(listed) == 2 and listed[1] and not set(listed[0]) & set(listed[1])
    page.wait_for_function("ids => ids.includes(document.getElementById('card').dataset.queryId) && "
                           "document.querySelector('#buttons button.label:not([disabled])')", arg=listed[1])
    qid = page.get_attribute("#card", "data-query-id")
    page.click("#buttons button[data-label='funny']")
    next_item(page)
    page.wait_for_function("document.getElementById('n-rated').textContent === '1'")
    assert "1 answer could not be saved" in page.text_content("#lost")
    assert [(r["query_id"], r["label"]) for r in exp.answers()] == [(qid, "funny")]
    assert errors == []
    ctx.close()


def test_keyboard_shortcuts_and_no_focus_carried_over(browser, shared_server):
    srv = shared_server
    exp = Exp(srv)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}")
    qid = next_item(page)
    buttons = page.locator("#buttons button.label")
    assert buttons.evaluate_all("bs => bs.map(b => b.dataset.label)") == LABELS
    assert page.locator("#buttons button.label .key").all_text_contents() == ["1", "2", "3"]
    assert buttons.evaluate_all("bs => bs.map(b => b.getAttribute('aria-keyshortcuts'))") == ["1", "2", "3"]
    no_focus = "document.activeElement === document.body || document.activeElement === null"
    assert page.evaluate(no_focus)  # new buttons are not focused
    expected = []
    for key in ("2", "3", "1"):
        page.keyboard.press(key)
        expected.append((qid, LABELS[int(key) - 1]))
        qid = next_item(page)
        assert page.evaluate(no_focus)
    # a clicked (hence focused) button is blurred, so no focus ring moves on to the next item
    page.click("#buttons button[data-label='funny']")
    expected.append((qid, "funny"))
    qid = next_item(page)
    assert page.evaluate(no_focus)
    # a held key (auto-repeat) and a double click answer once
    page.keyboard.down("1")
    page.keyboard.down("1")  # repeat
    page.keyboard.down("1")
    page.keyboard.up("1")
    expected.append((qid, "unfunny"))
    qid = next_item(page)
    page.dblclick("#buttons button[data-label='somewhat funny']")
    expected.append((qid, "somewhat funny"))
    qid = next_item(page)
    page.keyboard.press("3")
    page.keyboard.press("3")  # pressed twice in a row: the second lands on the next item before it takes answers
    expected.append((qid, "funny"))
    qid = next_item(page)
    page.keyboard.press("9")  # no such label: nothing happens
    time.sleep(0.3)
    assert page.get_attribute("#card", "data-query-id") == qid
    assert [(r["query_id"], r["label"]) for r in exp.answers()] == expected
    assert page.text_content("#n-rated") == str(len(expected))
    assert page.evaluate(no_focus)
    assert errors == []
    ctx.close()


def test_crowd_worker_id_from_the_link_and_completion_code(browser, shared_server):
    srv = shared_server
    exp = Exp(srv, answers_per_participant=3)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}?participant=W123")
    ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=srv.url)
    next_item(page)
    assert page.text_content("#participant-id") == "W123"
    for i in range(3):
        assert page.is_hidden("#complete")
        page.click(f"#buttons button[data-label='{LABELS[i]}']")
        if i < 2:
            next_item(page)
            assert page.text_content("#n-rated") == str(i + 1)
    page.wait_for_selector("#complete:not([hidden])")
    code = page.text_content("#completion-code").strip()
    assert code
    assert page.text_content("#n-rated") == "3"
    assert page.is_hidden("#buttons")
    assert page.get_attribute("#card", "data-query-id") is None
    page.click("#copy-code")
    page.wait_for_function("document.getElementById('copy-status').textContent === 'Copied.'")
    assert page.evaluate("navigator.clipboard.readText()") == code
    rows = exp.answers()
    assert len(rows) == 3 and {r["participant_id"] for r in rows} == {"W123"}
    # a reload without the parameter keeps the id (remembered for this experiment) and the code
    page.goto(f"{srv.url}/rate/{exp.id}")
    page.wait_for_selector("#complete:not([hidden])")
    assert page.text_content("#participant-id") == "W123"
    assert page.text_content("#completion-code").strip() == code
    # another worker on the same link gets items of their own
    page.goto(f"{srv.url}/rate/{exp.id}?participant=W456")
    next_item(page)
    assert page.text_content("#participant-id") == "W456"
    assert page.is_hidden("#complete")
    # an id the server refuses (longer than 64 characters): said so, and an anonymous id is used
    page.goto(f"{srv.url}/rate/{exp.id}?participant={'W' * 65}")
    next_item(page)
    assert "not accepted" in page.text_content("#id-note")
    assert page.text_content("#participant-id") not in ("W" * 65, "W456", "W123")
    assert errors == []
    ctx.close()


def test_pages_without_an_item_exhausted_done_paused_ended(browser, shared_server):
    srv = shared_server
    exp = Exp(srv)
    ctx, page, errors = open_page(browser, "about:blank")
    asks, fake = [], {"state": "exhausted"}

    def fake_state(route):
        asks.append(time.monotonic())
        assert set(route.request.post_data_json) == {"participant_id", "n"}
        route.fulfill(json={"state": fake["state"], "retry_after": 1, "n_answered": 7})

    page.route("**/api/experiments/*/queries", fake_state)
    page.goto(f"{srv.url}/rate/{exp.id}")
    page.wait_for_function("document.getElementById('item-text').textContent === "
                           "'Thank you! You have rated every item we need from you right now.'")
    assert page.is_hidden("#buttons") and page.text_content("#n-rated") == "7"
    time.sleep(1.5)
    assert len(asks) == 1  # asks again after 30 s, not after retry_after (1 s here)
    fake["state"] = "done"
    page.reload()
    page.wait_for_function("document.getElementById('item-text').textContent.includes('found its answer')")
    page.unroute("**/api/experiments/*/queries")
    owner = f"{srv.url}/api/experiments/{exp.id}"
    assert HTTP.post(f"{owner}/pause", headers=exp.auth).status_code == 200
    page.reload()
    page.wait_for_function("document.getElementById('item-text').textContent.includes('paused')")
    assert page.is_hidden("#buttons")
    assert HTTP.post(f"{owner}/resume", headers=exp.auth).status_code == 200
    next_item(page)  # by itself, after the server's retry_after
    assert HTTP.post(f"{owner}/stop", headers=exp.auth).status_code == 200
    page.reload()
    page.wait_for_function("document.getElementById('item-text').textContent.includes('has ended')")
    assert page.is_hidden("#buttons")
    assert HTTP.post(f"{owner}/archive", headers=exp.auth).status_code == 200
    page.reload()
    page.wait_for_function("document.getElementById('item-text').textContent.includes('has ended')")
    assert errors == []
    ctx.close()


def cartoon_png() -> bytes:
    """A small made-up cartoon (an island with a palm tree and a laptop), drawn with matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, Ellipse, Polygon, Rectangle

    fig = plt.figure(figsize=(9, 5.4), dpi=100)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 90)
    ax.set_ylim(0, 54)
    ax.axis("off")
    ax.add_patch(Rectangle((0, 0), 90, 54, color="#fdfcf7"))
    for y in (12, 9, 6):
        ax.plot([4, 86], [y, y], color="#8aa", lw=1)
    ax.add_patch(Ellipse((45, 14), 46, 10, fc="#f1e3b5", ec="#222", lw=2))
    ax.plot([47, 49, 52, 54], [15, 28, 38, 44], color="#222", lw=3)
    for dx, dy in ((-12, -5), (-9, 3), (10, 2), (12, -6), (2, 8)):
        ax.plot([54, 54 + dx], [44, 44 + dy], color="#222", lw=2.5)
    ax.add_patch(Circle((36, 26), 2.4, fc="#fdfcf7", ec="#222", lw=2))
    ax.plot([36, 36], [23.6, 16.5], color="#222", lw=2)
    ax.plot([36, 33, 36, 39], [16.5, 12.5, 16.5, 13], color="#222", lw=2)
    ax.plot([36, 40], [21, 19], color="#222", lw=2)
    ax.add_patch(Polygon([(38.5, 17), (44, 17), (45.5, 21.5), (40, 21.5)], fc="#dde", ec="#222", lw=2))
    ax.add_patch(Circle((78, 44), 5, fc="none", ec="#222", lw=1.5))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


INSTRUCTIONS = ("Look at the cartoon, read the caption below it and rate how funny the caption is.\n"
                "On a keyboard, press 1, 2 or 3.")


def test_instructions_and_context_image_on_phone_and_desktop(browser, shared_server, tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    srv = shared_server
    png = cartoon_png()
    exp = Exp(srv, name="Caption contest: the island", instructions=INSTRUCTIONS,
              image={"content_type": "image/png", "data": base64.b64encode(png).decode()})
    public = HTTP.get(f"{srv.url}/api/experiments/{exp.id}/public").json()
    assert public["instructions"] == INSTRUCTIONS and public["image_url"]
    sizes = {"phone": dict(viewport={"width": 390, "height": 844}, device_scale_factor=1, is_mobile=True,
                           has_touch=True),
             "desktop": dict(viewport={"width": 1280, "height": 900})}
    for name, args in sizes.items():
        ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}", **args)
        next_item(page)
        page.wait_for_function("document.getElementById('context-image').complete && "
                               "document.getElementById('context-image').naturalWidth > 0")
        assert page.text_content("#instructions") == INSTRUCTIONS  # as text, line break and all
        assert page.is_visible("#context-image")
        width = args["viewport"]["width"]
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        box = page.locator("#context-image").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        assert box["height"] <= 0.5 * args["viewport"]["height"]
        # the item's buttons are on the first screen, under the picture and the caption
        last = page.locator("#buttons button.label").last.bounding_box()
        assert last["y"] + last["height"] <= args["viewport"]["height"]
        page.screenshot(path=str(shots / f"rate-{name}.png"))
        assert errors == []
        ctx.close()
    for name in ("rate-phone.png", "rate-desktop.png"):
        assert (shots / name).stat().st_size > 1000
    if os.environ.get("PUREBANDITS_UPDATE_DOC_IMAGES"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name in ("rate-phone.png", "rate-desktop.png"):
            shutil.copy(shots / name, DOCS_IMG / name)


def test_every_page_links_the_svg_favicon(shared_server):
    srv = shared_server
    exp = Exp(srv)
    for path in ("/", f"/rate/{exp.id}", f"/dashboard/{exp.id}"):
        html = HTTP.get(srv.url + path).text
        links = re.findall(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', html)
        assert len(links) == 1, path
        r = HTTP.get(httpx.URL(srv.url + path).join(links[0]))
        assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
        assert r.text.lstrip().startswith("<svg") and len(r.content) < 2000



# every item the card shows, in order: its query id and text (a repeat would show up twice)
WATCH_SHOWN = """
window.__shown = [];
document.addEventListener("DOMContentLoaded", () => {
  const card = document.getElementById("card");
  if (!card) return;
  new MutationObserver(() => {
    window.__shown.push({qid: card.dataset.queryId, text: document.getElementById("item-text").textContent});
  }).observe(card, {attributes: true, attributeFilter: ["data-shown"]});
});
"""

MANY = [f"Caption {i}: they said the island had Wi-Fi." for i in range(30)]


def test_rates_five_per_ask_with_prefetch_through_a_network_cut_and_a_reload(browser, shared_server):
    """Asks with n = 5 and prefetch: a click shows the next item before its answer is acknowledged, the
    participant goes on offline with the items already fetched, a reload with answers unsent loses none,
    and every clicked (query, label) is stored exactly once."""
    srv = shared_server
    exp = Exp(srv, items=MANY)
    ctx = browser.new_context(viewport={"width": 900, "height": 900})
    ctx.add_init_script(WATCH_SHOWN)
    ctx.add_init_script(DEEP_PREFETCH)
    page = ctx.new_page()
    page.set_default_timeout(15000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    asks: list[dict] = []
    in_flight = {"asks": 0}

    def is_ask(req) -> bool:
        return req.method == "POST" and req.url.endswith(f"/api/experiments/{exp.id}/queries")

    def ask_sent(req):
        if is_ask(req):
            asks.append(req.post_data_json)
            in_flight["asks"] += 1

    def ask_over(req):
        if is_ask(req):
            in_flight["asks"] -= 1

    page.on("request", ask_sent)
    page.on("requestfinished", ask_over)
    page.on("requestfailed", ask_over)
    held: list = []
    hold = {"on": True}

    def hold_answers(route):
        if hold["on"]:
            held.append((route, route.fetch()))  # stored by the server, its acknowledgement held back
        else:
            route.continue_()

    page.route("**/api/queries/*/answer", hold_answers)
    page.goto(f"{srv.url}/rate/{exp.id}")
    clicked: list[tuple[str, str]] = []

    def rate(label: str) -> None:
        clicked.append((page.get_attribute("#card", "data-query-id"), label))
        page.click(f"#buttons button[data-label='{label}']")
        assert next_item(page) != clicked[-1][0]

    def settled() -> None:
        """every answer acknowledged and no ask in flight: the page holds its refilled queue"""
        page.wait_for_selector("#unsent", state="hidden")
        wait_until(page, lambda: in_flight["asks"] == 0)
        page.wait_for_function(f"document.getElementById('n-rated').textContent === '{len(clicked)}'")

    next_item(page)
    assert asks[0] == {"participant_id": page.text_content("#participant-id"), "n": 5}
    # the first answer is stored but its acknowledgement held back: the next items are there at once,
    # the other answers wait behind it (they go out one after another)
    rate("funny")
    wait_until(page, lambda: len(held) == 1)
    assert page.text_content("#n-rated") == "0"
    assert page.text_content("#unsent") == "1 answer waiting to be sent"
    rate("unfunny")
    assert page.text_content("#unsent") == "2 answers waiting to be sent"
    rate("somewhat funny")  # few items left: the page asks for more, and the ask counts the stored answer
    wait_until(page, lambda: len(asks) == 2 and in_flight["asks"] == 0)
    page.wait_for_function("document.getElementById('n-rated').textContent === '1'")
    assert len(held) == 1 and page.text_content("#unsent") == "3 answers waiting to be sent"
    hold["on"] = False
    route, response = held.pop()
    route.fulfill(response=response)  # the acknowledgement after the ask: not counted a second time
    settled()
    page.unroute("**/api/queries/*/answer")  # the answers go straight to the server from here on
    for label in ("funny", "unfunny"):
        rate(label)
    settled()
    assert exp.results()["n_answers"] == 5

    # the network cut: the participant goes on with the items fetched (at least this one and two more)
    ctx.set_offline(True)
    for label in ("funny", "funny", "somewhat funny"):
        rate(label)
    assert page.text_content("#unsent") == "3 answers waiting to be sent"
    assert page.is_hidden("#lost")
    assert exp.results()["n_answers"] == 5
    ctx.set_offline(False)
    for label in ("unfunny", "funny", "somewhat funny", "funny"):
        rate(label)
    settled()
    assert page.is_hidden("#lost")
    assert exp.results()["n_answers"] == len(clicked) == 12
    assert sorted((r["query_id"], r["label"]) for r in exp.answers()) == sorted(clicked)
    shown = page.evaluate("window.__shown")
    assert len({s["qid"] for s in shown}) == len({s["text"] for s in shown}) == len(shown) >= 13
    # every ask says how many items it wants: five new ones beyond those the page holds (at most 10)
    assert asks and all(set(a) == {"participant_id", "n"} and 5 <= a["n"] <= 10 for a in asks)
    assert any(a["n"] > 5 for a in asks)

    # answers given offline, then a reload before they could be sent, then the connection back: the
    # reloaded page sends them from the outbox kept in localStorage, each once. (Not a reload while
    # offline: Chromium's emulated offline lets the old page's retry through as it navigates away.)
    ctx.set_offline(True)
    for label in ("unfunny", "funny"):
        rate(label)
    key = f"purebandits.outbox.e{exp.id}.{page.text_content('#participant-id')}"
    saved = page.evaluate(f"JSON.parse(localStorage.getItem('{key}'))")
    assert [(a["query_id"], a["label"]) for a in saved] == clicked[-2:]
    page.route("**/api/queries/*/answer", lambda route: route.abort("internetdisconnected"))
    ctx.set_offline(False)
    page.reload()
    next_item(page)  # the items the server still holds for this participant, minus the answered ones
    assert page.text_content("#unsent") == "2 answers waiting to be sent"
    assert exp.results()["n_answers"] == 12
    page.unroute("**/api/queries/*/answer")
    page.wait_for_selector("#unsent", state="hidden")
    page.wait_for_function("document.getElementById('n-rated').textContent === '14'")
    assert exp.results()["n_answers"] == len(clicked) == 14
    assert sorted((r["query_id"], r["label"]) for r in exp.answers()) == sorted(clicked)
    assert not {s["qid"] for s in page.evaluate("window.__shown")} & {qid for qid, _ in clicked}
    page.reload()  # the outbox is empty now: nothing is sent twice
    next_item(page)
    time.sleep(0.5)
    assert page.text_content("#n-rated") == "14"
    assert exp.results()["n_answers"] == 14
    assert page.is_hidden("#lost")
    assert errors == []
    ctx.close()


def test_a_page_that_closes_gives_back_the_items_it_holds(browser, shared_server):
    """The item on screen and the one fetched ahead go back to the learner when the participant leaves (a
    release per item on ``pagehide``), not when they expire; an answer given just before leaving is stored."""
    srv = shared_server
    exp = Exp(srv)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}")
    next_item(page)
    page.click("#buttons button[data-label='funny']")
    next_item(page)
    page.wait_for_selector("#unsent", state="hidden")
    wait_until(page, lambda: pending(exp) == 2)  # the item on screen and the one fetched ahead
    page.goto("about:blank")
    wait_until(page, lambda: pending(exp) == 0)
    assert [r["label"] for r in exp.answers()] == ["funny"]
    assert errors == []
    ctx.close()


def pending(exp: Exp) -> int:
    """Pulls the experiment's learner counts as out (its state's ``pending_``)."""
    r = HTTP.get(f"{exp.url}/api/experiments/{exp.id}/state", headers=exp.auth)
    return sum(r.json()["state"]["state"]["pending_"]["__ndarray__"])
