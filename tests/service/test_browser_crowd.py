"""Crowd platforms and rater quality in a real headless Chromium (issue 42): a Prolific link and an MTurk link
(preview, then accepted) walk through to the completion redirect and the form POST, received by a local HTTP
server standing for the platform; skip; a gold item at its position; a flagged participant excluded from the
dashboard and included again, the ranking following a replay of the log without them.

Screenshots for docs/service.md are written to docs/img when ``PUREBANDITS_UPDATE_DOC_IMAGES`` is set.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from test_browser_rate import CAPTIONS, LABELS, next_item, open_page, wait_until

from conftest import HTTP

pytestmark = pytest.mark.browser

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
GOLD = {"id": "gold-island", "text": "GOLD: a caption the editors all found funny.", "label": "funny"}


class Platform:
    """A local HTTP server standing for the crowd platform: records every request (method, path, query, form)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self, method: str) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                parts = urlsplit(self.path)
                platform.requests.append({"method": method, "path": parts.path, "query": parse_qs(parts.query),
                                          "form": parse_qs(body)})
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(b"<!doctype html><title>platform</title><p>Submission received.</p>")

            def do_GET(self) -> None:  # noqa: N802 - http.server's names
                self._record("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._record("POST")

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Platform:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Exp:
    def __init__(self, srv, **spec):
        spec = {"name": "Caption contest: the island", "items": CAPTIONS, "seed": 3, **spec}
        r = HTTP.post(f"{srv.url}/api/experiments", json=spec)
        assert r.status_code == 201, r.text
        self.url, self.id, token = srv.url, r.json()["id"], r.json()["owner_token"]
        self.token = token
        self.auth = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, **params):
        r = HTTP.get(f"{self.url}/api/experiments/{self.id}/{path}", headers=self.auth, params=params)
        assert r.status_code == 200, r.text
        return r

    def csv(self, name: str) -> list[dict]:
        return list(csv.DictReader(io.StringIO(self.get(name).text)))


def save(page, tmp_path, name: str) -> None:
    shots = tmp_path / "screenshots"
    shots.mkdir(exist_ok=True)
    page.screenshot(path=str(shots / name))
    assert (shots / name).stat().st_size > 1000
    if os.environ.get("PUREBANDITS_UPDATE_DOC_IMAGES"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copy(shots / name, DOCS_IMG / name)


def test_prolific_link_to_the_completion_redirect(browser, shared_server, tmp_path):
    srv = shared_server
    with Platform() as prolific:
        exp = Exp(srv, answers_per_participant=3, completion_url=prolific.url + "/submissions/complete?cc={code}")
        pid = "5f0c1a2b3c4d5e6f7a8b9c0d"
        link = f"{srv.url}/rate/{exp.id}?PROLIFIC_PID={pid}&STUDY_ID=60aa1b2c&SESSION_ID=sess-77"
        ctx, page, errors = open_page(browser, link)
        next_item(page)
        assert page.text_content("#participant-id") == pid
        for i in range(3):
            page.keyboard.press(str(i + 1))
            if i < 2:
                next_item(page)
        page.wait_for_selector("#complete:not([hidden])")
        code = page.text_content("#completion-code").strip()
        save(page, tmp_path, "prolific-complete.png")
        page.wait_for_url(prolific.url + "/**")  # the page goes to Prolific by itself
        assert [(r["method"], r["path"], r["query"]) for r in prolific.requests
                if r["path"] != "/favicon.ico"] == [("GET", "/submissions/complete", {"cc": [code]})]
        part = exp.csv("participants.csv")
        assert [(p["participant_id"], p["platform"], p["study"], p["session"], p["completion_code"]) for p in part] \
            == [(pid, "prolific", "60aa1b2c", "sess-77", code)]
        assert errors == []
        ctx.close()


def test_mturk_preview_then_accepted_posts_the_assignment(browser, server_cls, tmp_path):
    with Platform() as mturk:
        # a server of its own: its Content-Security-Policy lets the form go to this platform's origin
        env = {"PUREBANDITS_MTURK_SUBMIT_ORIGINS": mturk.url}
        with server_cls(f"sqlite:///{tmp_path / 'm.sqlite'}", log_dir=tmp_path, env=env) as srv:
            exp = Exp(srv, answers_per_participant=2)
            base = f"{srv.url}/rate/{exp.id}?hitId=3HIT&turkSubmitTo={mturk.url}"
            # the real Content-Security-Policy (no bypass): its form-action must allow the platform's origin
            ctx, page, errors = open_page(browser, base + "&assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE", bypass_csp=False)
            page.wait_for_selector("#preview:not([hidden])")
            assert page.text_content("#item-text") not in ("", "Loading…")
            assert page.locator("#buttons button.label").count() == 3
            assert all(page.locator("#buttons button.label").nth(i).is_disabled() for i in range(3))
            save(page, tmp_path, "mturk-preview.png")
            page.wait_for_timeout(500)
            assert exp.get("participants").json()["n_participants"] == 0 and exp.csv("answers.csv") == []
            # accepted: the worker rates, then the page posts the assignment to MTurk's externalSubmit
            page.goto(base + "&assignmentId=3ASSIGN&workerId=A1WORKER")
            for i in range(2):
                page.wait_for_selector("#buttons button.label:not([disabled])")
                page.wait_for_timeout(300)
                page.keyboard.press(str(i + 1))
                page.wait_for_timeout(300)
            wait_until(page, lambda: any(r["method"] == "POST" for r in mturk.requests))
            post = next(r for r in mturk.requests if r["method"] == "POST")
            part = exp.csv("participants.csv")
            assert post["path"] == "/mturk/externalSubmit"
            assert post["form"] == {"assignmentId": ["3ASSIGN"], "completion_code": [part[0]["completion_code"]]}
            assert (part[0]["participant_id"], part[0]["platform"], part[0]["study"], part[0]["session"]) == \
                ("A1WORKER", "mturk", "3HIT", "3ASSIGN")
            assert errors == []
            ctx.close()


def test_a_link_cannot_send_the_code_to_another_site(browser, shared_server):
    srv = shared_server
    with Platform() as elsewhere:
        exp = Exp(srv, answers_per_participant=1)
        ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}?assignmentId=A9&workerId=W9&hitId=H"
                                               f"&turkSubmitTo={elsewhere.url}")
        next_item(page)
        page.keyboard.press("1")
        page.wait_for_selector("#complete:not([hidden])")
        page.wait_for_timeout(800)
        assert elsewhere.requests == [] and "cannot send your work" in page.text_content("#message")
        ctx.close()


def test_skip_and_a_gold_item_at_its_position(browser, shared_server, tmp_path):
    srv = shared_server
    exp = Exp(srv, allow_skip=True, gold=[GOLD], gold_positions=[3])
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}?participant=W1")
    texts = []
    for i in range(5):
        next_item(page)
        texts.append(page.text_content("#item-text"))
        if i == 0:
            assert page.is_visible("#buttons button.skip")
            save(page, tmp_path, "rate-skip.png")
        page.keyboard.press("s" if i == 1 else "3")
    wait_until(page, lambda: len(exp.csv("answers.csv")) == 5)
    assert texts[2] == GOLD["text"] and GOLD["text"] not in texts[:2] + texts[3:]
    answers = exp.csv("answers.csv")
    assert [(a["label"], a["position"], a["algorithm"] == "gold") for a in answers] == \
        [("funny", "1", False), ("skip", "2", False), ("funny", "3", True), ("funny", "4", False),
         ("funny", "5", False)]
    results = exp.get("results").json()
    assert results["n_answers"] == 3  # the skip and the gold answer are not told to the learner
    assert errors == []
    ctx.close()


def _top(exp) -> list[tuple]:
    return [(r["id"], r["count"], None if r["mean"] is None else round(r["mean"], 9))
            for r in exp.get("results", timeline="false").json()["ranking"]]


def _expected_top(exp, excluded: set[str]) -> dict[str, tuple]:
    """Per item, the count and mean of the answers a replay without ``excluded`` tells the learner (answers.csv)."""
    told: dict[str, list[float]] = {}
    for a in exp.csv("answers.csv"):
        if a["algorithm"] != "gold" and a["label"] != "skip" and a["participant_id"] not in excluded:
            told.setdefault(a["item_id"], []).append(float(a["reward"]))
    return {i: (len(v), round(sum(v) / len(v), 9)) for i, v in told.items()}


def test_flagged_participant_excluded_and_included_from_the_dashboard(browser, shared_server, tmp_path):
    srv = shared_server
    exp = Exp(srv, repeats="not_consecutive")

    def rate(pid: str, n: int, label_of, pause: float = 0.0) -> None:
        HTTP.post(f"{srv.url}/api/participants", json={"participant_id": pid})
        for _ in range(n):
            q = HTTP.post(f"{srv.url}/api/experiments/{exp.id}/queries", json={"participant_id": pid}).json()
            assert q["state"] == "ok", q
            time.sleep(pause)
            r = HTTP.post(f"{srv.url}/api/queries/{q['query_id']}/answer",
                           json={"participant_id": pid, "label": label_of(q)})
            assert r.status_code == 200

    # honest raters, side by side at a person's pace (1.7 s an answer: not "fast"): the caption's own funniness
    honest = [threading.Thread(target=rate, args=(f"honest{k}", 8, lambda q: LABELS[CAPTIONS.index(
        q["item"]["text"]) % 3], 1.7)) for k in range(4)]
    for t in honest:
        t.start()
    for t in honest:
        t.join()
    rate("careless", 12, lambda q: "funny")  # one label for everything, at once
    before = _top(exp)
    ctx, page, errors = open_page(browser, f"{srv.url}/dashboard/{exp.id}#token={exp.token}",
                                  viewport={"width": 1280, "height": 1000})
    row = page.locator("#participants tr[data-participant='careless']")
    row.wait_for()
    assert row.locator("td.flags").text_content() == "fast, one label"
    assert page.locator("#participants td.flags").all_text_contents() == ["fast, one label", "", "", "", ""]
    assert page.locator("#participants tbody tr").first.get_attribute("data-participant") == "careless"
    row.scroll_into_view_if_needed()
    save(page, tmp_path, "dashboard-participants.png")
    page.on("dialog", lambda d: d.accept())
    row.locator("button.exclude").click()
    page.locator("#participants tr.excluded[data-participant='careless']").wait_for()
    after = _top(exp)
    expected = _expected_top(exp, {"careless"})
    assert {i: (c, m) for i, c, m in after if c} == expected  # the learner as the log without them says
    assert after != before
    page.locator("#participants tr[data-participant='careless'] button.include").click()
    page.locator("#participants tr[data-participant='careless']:not(.excluded)").wait_for()
    assert _top(exp) == before  # included again: as before
    assert errors == []
    ctx.close()


def test_phone_layout_of_the_skip_button(browser, shared_server, tmp_path):
    srv = shared_server
    exp = Exp(srv, allow_skip=True)
    ctx, page, errors = open_page(browser, f"{srv.url}/rate/{exp.id}",
                                  viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    next_item(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    box = page.locator("#buttons button.skip").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] + box["height"] <= 844
    save(page, tmp_path, "rate-skip-phone.png")
    assert errors == []
    ctx.close()
