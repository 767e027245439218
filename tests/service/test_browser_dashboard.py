"""The owner dashboard in a real headless Chromium under the service's Content-Security-Policy (issue #21):
only the token form until a token is accepted, readable algorithm settings, no horizontal overflow on a
phone, interval numbers clipped to the reward range; a 150-caption contest (real captions and votes) with
two learners and thousands of answers: every item reachable (pages, search, sort by any column, all by the
server), every BokehJS chart drawn with data (sharp on HiDPI, hover with escaped item text), the banner when
the learner stops with the on-done settings and the webhook's status, the network cut and back.

Screenshots go to /tmp/dash_shots/ and tmp_path for a look by eye; with PUREBANDITS_UPDATE_DOC_IMAGES set,
docs/img/dashboard.png, dashboard-phone.png and dashboard-two-learners.png are replaced.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
from browser_support import session_database
from study_support import open_study

from conftest import HTTP, Server
from purebandits.instances.real import caption_contest

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
    # on a fresh install, creating compiles the new learners' code first (service.warmup: LUCB1's ask/tell
    # kernels take 15-45 s on two busy cores)
    r = HTTP.post(f"{url}/api/experiments", json={"name": "dashboard layout", "items": ITEMS, "labels": LABELS,
                                                   "algorithms": LEARNERS, "seed": 5}, timeout=180)
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["owner_token"]


def answer(url: str, eid: int, n: int) -> None:
    """n answers from fresh participants through the API (labels cycle through good, ok, bad)."""
    names = [lab["name"] for lab in LABELS]
    for i in range(n):
        pid = HTTP.post(f"{url}/api/participants").json()["participant_id"]
        q = HTTP.post(f"{url}/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["state"] == "ok", q
        r = HTTP.post(f"{url}/api/queries/{q['query_id']}/answer",
                       json={"participant_id": pid, "label": names[i % 3]})
        assert r.status_code == 200, r.text


def assert_only_the_form(page) -> None:
    assert page.is_visible("#token-form")
    for sel in ("#dash-body", "#controls", "#pause", "#resume", "#stop", "#export-answers", "#export-summary",
                "#ranking", "#learner-settings", ".stats"):
        assert page.is_hidden(sel), sel


@pytest.fixture
def served(shared_server):
    """An experiment of the test's own, with 18 answers, on the server the module's small tests share."""
    eid, token = create(shared_server.url)
    answer(shared_server.url, eid, 18)
    return shared_server.url, eid, token


def test_a_new_experiment_says_its_charts_have_nothing_yet(browser, shared_server):
    """Before any answer: words over each chart instead of empty frames, and no recommendation shown as a result
    (the learner's pick before any data is arbitrary)."""
    srv = shared_server
    eid, token = create(srv.url)
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    page.goto(f"{srv.url}/dashboard/{eid}#token={token}")
    page.wait_for_selector("#chart-response[data-rows='0']")
    page.wait_for_selector("#chart-leaders[data-rows='0']")
    assert page.text_content("#recommendation") == "none yet (no answers)"
    notes = page.locator("p.chart-empty").all_text_contents()
    assert notes.count("Nothing yet: this chart fills in as participants answer.") == 4  # activity charts
    assert notes.count("Nothing yet: the first point comes after 100 answers.") == 3  # history charts
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    ctx.close()


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
    # the error probability in the owner's terms: 0.05 asked, delta = 0.025 because the proof bounds it by 2 delta
    assert "Wrong with probability at most 0.05" in kl and "2 x delta" in kl and "{" not in kl
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


# ---------------------------------------------------------------- a 150-item contest with thousands of answers
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
# Real captions and votes: contest 558 of the New Yorker cartoon caption contest, as bundled in
# purebandits/data/caption_contest/ (Jain, Jamieson, Mankoff, Nowak, Sievert (2020), The New Yorker Cartoon
# Caption Contest Dataset, https://nextml.github.io/caption-contest-data/; CC BY 4.0, not for commercial use).
# The 150 captions: the contest's best by mean (0.38) and 149 drawn (seed 558) from those below its 20 best
# (means 0.02 to 0.27, median 0.09), in a shuffled order. (In the whole contest the next 19 are within 0.05
# of the best: telling them apart takes far more answers than a test can simulate.) An item's id is "558-"
# and its row in the file (as the demo names contest 559's). Each simulated answer is drawn from the
# caption's real vote proportions (unfunny, somewhat funny, funny).
_CC = caption_contest("558")
_BEST = np.argsort(-_CC.means, kind="stable")
_RNG = np.random.default_rng(558)
_ROWS = _RNG.permutation([_BEST[0], *_RNG.choice(_BEST[20:], 149, replace=False)]).tolist()
IDS = [f"558-{row + 1}" for row in _ROWS]
CAPTIONS = [_CC.captions[row] for row in _ROWS]
CONTEST = [{"id": iid, "text": text} for iid, text in zip(IDS, CAPTIONS, strict=True)]
VOTES = {iid: _CC.votes[row] / _CC.votes[row].sum() for iid, row in zip(IDS, _ROWS, strict=True)}
# an id that no other id contains (a search for it finds it alone), and a word of a few captions
SOUGHT = next(i for i in IDS if sum(i in j for j in IDS) == 1 and not any(i in t for t in CAPTIONS))
WORD = "millennial"
WITH_WORD = [t for t in CAPTIONS if WORD in t.casefold()]
assert 2 <= len(WITH_WORD) <= 30, WITH_WORD
# markup in items' texts: shown literally in the charts' tooltips, never run (made-up votes)
MARKUP = ["<b>URGENT</b> said the fish", "<img src=x onerror=window.__xss=1> glub", "<i>a</i> & <u>b</u> & c",
          "<script>window.__xss=1</script> the tank", "<svg onload=window.__xss=1></svg> gills", "plain words"]
VOTES.update({f"m{i}": np.array([0.2 + 0.1 * i, 0.3, 0.5 - 0.1 * i]) for i in range(len(MARKUP))})
# the single-learner contest: a fixed-confidence learner that stops by its own rule (here after 7,419
# answers). Top-two's rule (its GLR statistic against a threshold) gives a progress that rises all along and
# a margin from about -4 to 0. (lil'UCB asks for its leader again and again, which a participant rates only
# once: ~20,000 answers from ~10,000 participants; an LUCB-type rule separates every other caption at once,
# near the end: its progress sits at 0 % until then.)
ONE = {"algorithm": "top_two", "params": {"delta": 0.1}}
# two learners side by side, half-way to stopping: the Gaussian and the Bernoulli (KL) transportation costs
TWO = [{"label": "TopTwo", "algorithm": "top_two", "params": {"delta": 0.1}},
       {"label": "TopTwo-KL", "algorithm": "top_two", "params": {"delta": 0.1, "cost": "bernoulli"}}]
TWO_LABELS = [learner["label"] for learner in TWO]
FIRST = TWO_LABELS[0]
CAPTION_LABELS = ["unfunny", "somewhat funny", "funny"]
HISTORY_EVERY = 60  # a history point every 60 answers of a learner: ~120 for ONE, 60 to 75 for each of TWO
ONE_RATE = 600  # participants per hour (they answer about 5 captions each)
TWO_ANSWERS, TWO_RATE = 8_000, 800
LAST = 30  # about the answers the banner test gives ONE (through the API, with labels drawn anew)
HOUR_MS = 3_600_000
ZERO_RATES = {"ask_rate_per_second": 0, "participant_rate_per_second": 0, "create_rate_per_second": 0}


class SimClock:
    """Epoch milliseconds moved by the simulation (which ends shortly before the real now)."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def simulate(study, clock: SimClock, runs: dict[int, tuple[int, int, float]], seed: int) -> dict[int, int]:
    """Crowds answer the experiments of ``runs`` ({eid: (n_answers, start_ms, participants_per_hour)}) on one
    clock: participants arrive from ``start_ms`` on (at random, at that rate on average), each answers a few
    captions (a median of 6 s to answer, a few seconds between answers; leaves when given none) with a label
    drawn from the caption's vote proportions (``VOTES``), until the experiment has ``n_answers`` or a
    participant is told a learner is done. The same answers in every run, whatever the real time
    (participant ids too: they decide the learner of each). Answers per experiment."""
    rng = np.random.default_rng(seed)
    clock.ms = min(start_ms for _, start_ms, _ in runs.values())
    # (time, tie, experiment, participant, query): an arrival without a participant, an ask without a query
    heap: list[tuple[int, int, int, str, str]] = [(start_ms, i, eid, "", "")
                                                  for i, (eid, (_, start_ms, _)) in enumerate(runs.items())]
    target = {eid: run[0] for eid, run in runs.items()}
    done = dict.fromkeys(runs, 0)
    left, tie = {}, len(heap)
    while heap:
        t, _, eid, pid, query = heapq.heappop(heap)
        if done[eid] >= target[eid]:
            continue
        clock.ms = max(clock.ms, t)
        tie += 1
        if not pid:  # a participant arrives, and the next one later
            assert t < runs[eid][1] + 12 * HOUR_MS, f"experiment {eid}: {done[eid]} answers in 12 hours"
            pid = study.new_participant(f"crowd-{eid}-{len(left)}")
            left[pid] = int(min(40, rng.geometric(1 / 10)))
            heapq.heappush(heap, (t, tie, eid, pid, ""))
            heapq.heappush(heap, (t + int(rng.exponential(HOUR_MS / runs[eid][2])), tie + 1, eid, "", ""))
            tie += 1
            continue
        if not query:  # the participant asks for a caption
            q = study.next_query(eid, pid)
            if q["state"] == "ok":
                wait = int(1000 * rng.lognormal(np.log(6.0), 0.6))
                heapq.heappush(heap, (clock.ms + wait, tie, eid, pid, q["query_id"] + "|" + q["item"]["id"]))
            elif q["state"] == "done":
                target[eid] = done[eid]
            continue
        qid, iid = query.split("|")
        study.answer(qid, pid, CAPTION_LABELS[rng.choice(3, p=VOTES[iid])])
        done[eid] += 1
        left[pid] -= 1
        if left[pid] > 0:
            heapq.heappush(heap, (clock.ms + int(rng.uniform(800, 3000)), tie, eid, pid, ""))
    return done


def build_contest(url: str, now: int) -> dict:
    """Fill ``url`` with two 150-caption contests that ran for hours before ``now`` (epoch ms): "two" (two
    learners, 8,000 answers, about half-way to stopping) and "one" (a learner a few answers short of stopping
    by its rule), and the "markup" experiment; their ids and owner tokens, and the answers "one" has."""
    clock = SimClock(now - 3 * HOUR_MS)
    study = open_study(url, clock=clock, history_every=HISTORY_EVERY, **ZERO_RATES)
    two, two_token = study.create_experiment({"name": "Caption contest 558: two learners", "items": CONTEST,
                                              "algorithms": TWO, "seed": 11})
    one_spec = {"name": "Caption contest 558", "items": CONTEST, "seed": 12, **ONE}
    one, one_token = study.create_experiment(one_spec)
    markup, markup_token = study.create_experiment({
        "name": "markup", "seed": 13, "algorithm": "lucb1", "params": {"k": 1},
        "items": [{"id": f"m{i}", "text": text} for i, text in enumerate(MARKUP)]})
    # "one" is left LAST answers short of where its twin (the same learner, seed and crowd, earlier on the
    # same clock) stopped, its crowd moved in time so that it ends two minutes ago
    twin, _ = study.create_experiment({**one_spec, "name": "twin"})
    start = now - 12 * HOUR_MS
    simulate(study, clock, {twin: (10**6, start, ONE_RATE)}, seed=1)
    stops_at = study.results(twin, timeline=False, limit=1)["learner_done"]["at_answers"]
    study.delete_experiment(twin)
    start += now - 2 * 60_000 - clock.ms
    assert simulate(study, clock, {one: (stops_at - LAST, start, ONE_RATE)}, seed=1) == {one: stops_at - LAST}
    assert not study.results(one, timeline=False, limit=1)["done"]
    runs = {two: (TWO_ANSWERS, now - 5 * HOUR_MS // 2, TWO_RATE), markup: (4 * HISTORY_EVERY, now - HOUR_MS, 300)}
    assert simulate(study, clock, runs, seed=2) == {two: TWO_ANSWERS, markup: 4 * HISTORY_EVERY}
    assert clock.ms < now - 60_000, (clock.ms - now) / 60_000  # nothing in the future
    study.close()
    study.engine.dispose()
    return {"two": [two, two_token], "one": [one, one_token], "markup": [markup, markup_token],
            "one_answers": stops_at - LAST}


@pytest.fixture(scope="module")
def contest(tmp_path_factory):
    """A server on the database of :func:`build_contest`, built once per test session: each further xdist worker
    that runs a test of this module gets a copy with its times moved to now (browser_support), as if built
    then, instead of simulating the 23,000 answers again (about 25 s of a core)."""
    tmp = tmp_path_factory.mktemp("contest")
    db = tmp / "contest.sqlite"
    info = session_database(tmp_path_factory, "dashboard-contest", db, build_contest)
    env = {"PUREBANDITS_HISTORY_EVERY": str(HISTORY_EVERY), "PUREBANDITS_EXPIRE_INTERVAL_SECONDS": "0.5",
           "PUREBANDITS_WEBHOOKS": "1", "PUREBANDITS_WEBHOOK_ALLOW_INTERNAL": "1"}  # the receiver: on the loopback
    with Server(f"sqlite:///{db}", env=env, log_dir=tmp) as srv:
        yield {"url": srv.url, "two": tuple(info["two"]), "one": tuple(info["one"]),
               "markup": tuple(info["markup"]), "one_answers": info["one_answers"], "tmp": tmp}


def answer_until_done(url: str, eid: int, limit: int = 1000) -> int:
    """Answers through the API (labels drawn from the captions' vote proportions) until the experiment's
    learner is done; how many. Each participant rates two captions: a participant's later captions are the
    learner's choice among those they have not rated, which near the stop are rarely the two it needs."""
    rng = np.random.default_rng(7)
    n = 0
    with httpx.Client(base_url=url, timeout=30) as c:
        while n < limit:
            pid = c.post("/api/participants").json()["participant_id"]
            for _ in range(2):
                q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
                if q["state"] in ("done", "stopped"):
                    return n
                if q["state"] != "ok":
                    break
                label = CAPTION_LABELS[rng.choice(3, p=VOTES[q["item"]["id"]])]
                r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
                assert r.status_code == 200, r.text
                n += 1
    raise AssertionError(f"not done after {n} answers")


def shots_dir(tmp: Path) -> Path:
    out = tmp / "screenshots"
    out.mkdir(exist_ok=True)
    return out


def publish(shots: Path, *names: str) -> None:
    """Copy the screenshots to docs/img/ when asked to (PUREBANDITS_UPDATE_DOC_IMAGES), never otherwise."""
    for name in names:
        assert (shots / name).stat().st_size > 10_000, name
    if os.environ.get("PUREBANDITS_UPDATE_DOC_IMAGES"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copy(shots / name, DOCS_IMG / name)


def shot_to(page, path: Path, selector: str | None = None) -> None:
    """The page from the top down to the bottom of ``selector`` (the whole page without one): the viewport
    grown for the shot, then restored (Playwright's ``full_page`` left this Chromium's page deaf to clicks)."""
    size = page.viewport_size
    bottom = page.evaluate("document.documentElement.scrollHeight") if selector is None else \
        page.evaluate("(s) => Math.ceil(document.querySelector(s).getBoundingClientRect().bottom + scrollY + 12)",
                      selector)
    page.set_viewport_size({"width": size["width"], "height": max(bottom, size["height"])})
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(700)  # the charts follow their new box
    page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": size["width"], "height": bottom}, scale="css")
    page.set_viewport_size(size)


def open_dashboard(browser, url: str, eid: int, token: str, width: int = 1280, height: int = 900, scale: float = 1,
                   **kw):
    ctx = browser.new_context(bypass_csp=False, viewport={"width": width, "height": height},
                              device_scale_factor=scale, **kw)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/dashboard/{eid}#token={token}")
    page.wait_for_selector("#ranking tbody tr")
    return ctx, page, errors


# every visible chart: its Bokeh figure, the rows of each of its data sources, its canvases' size in device
# pixels per CSS pixel, and how many of their pixels are coloured (data: the axes and grid are grey)
CHARTS = """() => Array.from(document.querySelectorAll('#charts .chart-box')).filter((b) => b.offsetParent !== null)
  .map((box) => {
    const view = Object.values(Bokeh.index).find((v) => v.model.type === 'Figure' && box.contains(v.el));
    if (!view) return {id: box.id, figure: false};
    const canvases = [];
    const walk = (root) => root.querySelectorAll('*').forEach((e) => {
      if (e.tagName === 'CANVAS') canvases.push(e);
      if (e.shadowRoot) walk(e.shadowRoot);
    });
    walk(box);
    let coloured = 0, ratio = 0, cssWidth = 0;
    canvases.forEach((c) => {
      const r = c.getBoundingClientRect();
      if (!c.width || !r.width) return;
      ratio = Math.max(ratio, c.width / r.width); cssWidth = Math.max(cssWidth, r.width);
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] > 128 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) coloured++;
      }
    });
    const rows = view.model.renderers.filter((r) => r.data_source)
      .map((r) => [r.glyph.type, r.data_source.get_length()]);
    return {id: box.id, figure: true, rows, coloured, ratio, cssWidth, canvases: canvases.length,
            xLabel: view.model.xaxes[0].axis_label, yLabel: view.model.yaxes[0].axis_label};
  })"""


def wait_for_charts(page, ids: list[str]) -> list[dict]:
    from playwright.sync_api import expect

    for cid in ids:
        expect(page.locator(f"#{cid}")).to_have_attribute("data-rows", re.compile(r"^[1-9]\d*$"), timeout=20_000)
    page.wait_for_timeout(800)  # BokehJS paints on the next frames
    return page.evaluate(CHARTS)


def assert_charts_drawn(charts: list[dict], expected: set[str], ratio: float) -> None:
    assert {c["id"] for c in charts} == expected, charts
    for c in charts:
        assert c["figure"], c
        # every data source holds data (but a leader's band: none where its interval is the whole range)
        assert c["rows"] and all(n > 0 for glyph, n in c["rows"] if glyph != "Patches"), c
        assert c["coloured"] > 50, c  # and it is drawn
        assert c["xLabel"] and c["yLabel"], c  # labelled axes
        assert abs(c["ratio"] - ratio) < 0.05, c  # HiDPI: a device pixel per device pixel


TWO_CHARTS = {"chart-leaders-0", "chart-leaders-1", "chart-progress", "chart-margin", "chart-timeline",
              "chart-allocation", "chart-participants", "chart-response"}


def api(url: str, token: str, path: str) -> dict:
    r = HTTP.get(f"{url}{path}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, (path, r.text)
    return r.json()


def shown_ids(page) -> list[str]:
    return page.eval_on_selector_all("#ranking tbody tr", "rows => rows.map((r) => r.dataset.id)")


def test_every_item_is_reachable_by_pages_search_and_sort(browser, contest):
    """Pages of 30 reach item 150; a search by id or words; a sort by every column; the page asks the server
    for the one page it shows (and the history and activity only when the results changed)."""
    from playwright.sync_api import expect

    url = contest["url"]
    eid, token = contest["two"]
    requests: list[str] = []
    ctx = browser.new_context(bypass_csp=False, viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{url}/dashboard/{eid}#token={token}")
    expect(page.locator("#page-count")).to_have_text("1–30 of 150")
    expect(page.locator("#ranking tbody tr")).to_have_count(30)
    assert page.is_disabled("#page-prev") and page.is_enabled("#page-next")
    # every page, up to item 150
    ranks, ids = [], []
    for first in range(1, 151, 30):
        expect(page.locator("#page-count")).to_have_text(f"{first}–{first + 29} of 150")
        expect(page.locator("#ranking tbody td.rank").first).to_have_text(str(first))
        ranks += [int(x) for x in page.locator("#ranking tbody td.rank").all_text_contents()]
        ids += shown_ids(page)
        if first < 121:
            page.click("#page-next")
    assert ranks == list(range(1, 151)) and sorted(ids) == sorted(IDS)
    assert page.is_disabled("#page-next") and page.is_enabled("#page-prev")
    page.click("#page-prev")
    expect(page.locator("#page-count")).to_have_text("91–120 of 150")
    # the interval's numbers, in the cell and its tooltip (title), inside the reward range
    for title in page.eval_on_selector_all("#ranking td.interval", "tds => tds.map((td) => td.title)"):
        nums = [float(x) for x in re.findall(r"-?\d+\.\d+", title)]
        assert "interval [" in title and nums and all(0.0 <= x <= 1.0 for x in nums), title
    # search by item id (typed fast: the debounce sends one query, not one per key)
    requests.clear()
    page.evaluate("""() => { window.__keys = [];
        document.getElementById('search').addEventListener('input',
            (e) => window.__keys.push([performance.now(), e.target.value])); }""")
    page.type("#search", SOUGHT, delay=40)
    expect(page.locator("#match-count")).to_have_text(f"1 of 150 match “{SOUGHT}”")
    expect(page.locator("#page-count")).to_have_text("1–1 of 1")
    assert shown_ids(page) == [SOUGHT]
    assert page.text_content("#ranking tbody td.text") == CAPTIONS[IDS.index(SOUGHT)]
    typed = [re.search(r"[?&]q=([^&]*)", u).group(1) for u in requests if "/results?" in u and "q=" in u]
    assert SOUGHT in typed, typed
    # a query for a part of the id goes out only if the typing stalled for the debounce's 300 ms after it (on a
    # loaded machine the browser can stall between two keys); at 40 ms a key, none does
    keys = page.evaluate("window.__keys")
    assert [value for _, value in keys] == [SOUGHT[:i] for i in range(1, len(SOUGHT) + 1)], keys
    for part in set(typed) - {SOUGHT}:
        i = [value for _, value in keys].index(part)
        assert keys[i + 1][0] - keys[i][0] >= 290, (part, keys)
    # search by a word (any case): the captions with "millennial" in them
    page.fill("#search", WORD)
    expect(page.locator("#match-count")).to_have_text(f"{len(WITH_WORD)} of 150 match “{WORD}”")
    expect(page.locator("#ranking tbody tr")).to_have_count(len(WITH_WORD))
    assert sorted(page.locator("#ranking td.text").all_text_contents()) == sorted(WITH_WORD)
    assert page.is_disabled("#page-next")
    page.fill("#search", "no such caption")
    expect(page.locator("#page-count")).to_have_text("no match")
    expect(page.locator("#match-count")).to_have_text("0 of 150 match “no such caption”")
    page.fill("#search", "")
    expect(page.locator("#page-count")).to_have_text("1–30 of 150")
    expect(page.locator("#match-count")).to_be_hidden()
    # sort by every column by a click on its header (again: the other order); the server's order is shown,
    # and the rank stays the learner's
    keys = ["count", "text", "mean", "lower", "upper"] + [f"label:{n}" for n in CAPTION_LABELS]
    for key in keys + ["rank"]:
        for _ in ("one order", "the other"):
            page.click(f"#ranking thead button.sort[data-sort='{key}']")
            th = page.locator(f"#ranking thead th:has(button.sort[data-sort='{key}'])")
            expect(th).to_have_attribute("aria-sort", re.compile("ascending|descending"))
            direction = "asc" if th.get_attribute("aria-sort") == "ascending" else "desc"
            want = api(url, token, f"/api/experiments/{eid}/results?algorithm={FIRST}&limit=30&offset=0&sort={key}"
                                   f"&order={direction}&timeline=false")
            expect(page.locator("#ranking tbody tr").first).to_have_attribute("data-id", want["ranking"][0]["id"])
            assert shown_ids(page) == [r["id"] for r in want["ranking"]], (key, direction)
            shown_ranks = [int(x) for x in page.locator("#ranking tbody td.rank").all_text_contents()]
            assert shown_ranks == [r["rank"] for r in want["ranking"]]
            if key == "count":
                counts = [int(x.split()[0]) for x in page.locator("#ranking td.count").all_text_contents()]
                assert counts == sorted(counts, reverse=direction == "desc")
            if key == "text" and direction == "asc":
                assert shown_ranks != sorted(shown_ranks)  # the learner's ranks, not the row numbers
    # the sort stays while paging: the second page of "funny" counts
    page.click("#ranking thead button.sort[data-sort='label:funny']")
    page.click("#page-next")
    expect(page.locator("#page-count")).to_have_text("31–60 of 150")
    # only pages were asked for; the history and activity only once while nothing changed
    page.wait_for_timeout(300)
    requests.clear()
    page.wait_for_timeout(6000)
    results = [u for u in requests if "/results?" in u]
    assert len(results) >= 4 and all("limit=30" in u and "timeline=false" in u for u in results), results
    assert not [u for u in requests if "/history" in u or "/activity" in u], requests
    assert errors == []
    ctx.close()


def hover_leader(page, box_id: str, back: int = 0) -> str:
    """Hover the ``back``-th last point of the leaders' chart ``box_id``; the tooltip's text (item, mean and
    interval checked)."""
    from playwright.sync_api import expect

    pos = page.evaluate("""([id, back]) => {
      const box = document.getElementById(id);
      box.scrollIntoView({block: 'center'});
      const v = Object.values(Bokeh.index).find((v) => v.model.type === 'Figure' && box.contains(v.el));
      const d = v.model.renderers.find((r) => r.glyph.type === 'Scatter').data_source.data;
      const i = d.text.length - 1 - back;
      const c = v.canvas_view.el.getBoundingClientRect();
      return [c.left + v.frame.x_scale.compute(d.x[i]), c.top + v.frame.y_scale.compute(d.y[i]), d.text[i]];
    }""", [box_id, back])
    page.mouse.move(pos[0] - 30, pos[1] + 30)
    page.mouse.move(pos[0], pos[1], steps=3)
    tip = page.locator(".bk-Tooltip .bk-tooltip-content", has_text=pos[2]).first
    expect(tip).to_be_visible()
    content = tip.text_content()
    assert re.search(r"mean:?\s*[01]\.\d{3}", content), content
    assert re.search(r"\[[01]\.\d{3}, [01]\.\d{3}\]", content), content
    page.mouse.move(2, 2)
    return content


def test_charts_draw_every_series_with_data(browser, contest):
    """Every chart is a BokehJS figure with data, drawn, with axis labels, sharp at 2 device pixels per
    pixel; one leaders' chart per learner; the tooltips give an item's text (markup shown as text), its
    mean and interval; on a 390 px phone nothing overflows."""
    from playwright.sync_api import expect

    url = contest["url"]
    eid, token = contest["two"]
    shots = shots_dir(contest["tmp"])
    ctx, page, errors = open_dashboard(browser, url, eid, token, scale=2)
    charts = wait_for_charts(page, sorted(TWO_CHARTS))
    assert_charts_drawn(charts, TWO_CHARTS, ratio=2)
    assert page.locator("#chart-leaders .chart-learner").all_text_contents() == TWO_LABELS
    first = next(c for c in charts if c["id"] == "chart-leaders-0")
    assert [n for glyph, n in first["rows"] if glyph == "Patches"][0] > 0  # the first learner's intervals as bands
    # the two learners' stopping progress and margin in one figure each, with a legend
    legends = page.evaluate("""() => ['chart-progress', 'chart-margin'].map((id) => {
      const box = document.getElementById(id);
      const v = Object.values(Bokeh.index).find((v) => v.model.type === 'Figure' && box.contains(v.el));
      const legend = v.model.above.find((m) => m.type === 'Legend');
      return legend.items.map((it) => it.label.value);
    })""")
    assert legends == [TWO_LABELS, TWO_LABELS]
    # the leaders' means and intervals stay inside the reward range [0, 1]
    bounds = page.evaluate("""() => {
      const box = document.getElementById('chart-leaders-0');
      const v = Object.values(Bokeh.index).find((v) => v.model.type === 'Figure' && box.contains(v.el));
      const d = v.model.renderers.find((r) => r.glyph.type === 'Scatter').data_source.data;
      return [Math.min(...d.y, ...d.lower), Math.max(...d.y, ...d.upper), d.text.length];
    }""")
    assert 0.0 <= bounds[0] <= bounds[1] <= 1.0 and bounds[2] > 10, bounds
    # hover a point of the leaders' chart: a tooltip with its item's text, mean and interval
    content = hover_leader(page, "chart-leaders-0")
    assert re.search(r"item:?\s*\S", content), content
    shot_to(page, shots / "dashboard-two-learners.png", "#ranking tbody tr:nth-child(6)")
    assert errors == []
    ctx.close()
    publish(shots, "dashboard-two-learners.png")  # each test publishes its own (xdist runs them apart)
    # item texts with markup: the tooltips show them as text, nothing runs
    meid, mtoken = contest["markup"]
    ctx, page, errors = open_dashboard(browser, url, meid, mtoken)
    wait_for_charts(page, ["chart-leaders-0"])
    seen = ""
    for i in range(4):
        seen += hover_leader(page, "chart-leaders-0", i)
    assert any(text in seen for text in MARKUP[:5]), seen
    assert page.evaluate("""() => Array.from(document.querySelectorAll('.bk-Tooltip')).map((t) => t.shadowRoot)
      .filter(Boolean).reduce((n, r) => n + r.querySelectorAll('b, i, u, img, svg, script').length, 0)""") == 0
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert errors == []
    ctx.close()
    # a phone: every chart fits (no horizontal scrolling), still drawn and sharp
    ctx, page, errors = open_dashboard(browser, url, eid, token, width=390, height=844, scale=2,
                                       is_mobile=True, has_touch=True)
    charts = wait_for_charts(page, sorted(TWO_CHARTS))
    assert_charts_drawn(charts, TWO_CHARTS, ratio=2)
    assert all(c["cssWidth"] <= 370 for c in charts), charts
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    assert page.is_visible("#sort-select") and page.is_hidden("#ranking thead")
    page.select_option("#sort-select", "label:funny")  # the phone's sort (no table header on cards)
    want = api(url, token, f"/api/experiments/{eid}/results?algorithm={FIRST}&limit=30&sort=label:funny&order=desc")
    expect(page.locator("#ranking tbody tr").first).to_have_attribute("data-id", want["ranking"][0]["id"])
    page.click(f"#learner-tabs button.tab[data-label='{TWO_LABELS[1]}']")
    expect(page.locator("#algorithm")).to_have_text(f"{TWO_LABELS[1]} · {TWO[1]['algorithm']}")
    page.wait_for_timeout(500)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    assert errors == []
    ctx.close()


@pytest.fixture
def hook():
    """A webhook receiver on the loopback: the JSON bodies it was sent."""
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield received, f"http://127.0.0.1:{srv.server_address[1]}/hook"
    srv.shutdown()


def test_banner_when_the_learner_stops_with_the_on_done_settings(browser, contest, hook):
    """The owner asks for auto-stop and a webhook before the learner stops; when it stops the banner says
    after how many answers, when, and what it recommends, the experiment is stopped and the webhook's call
    is shown. Screenshots at 1280 px and on a 390 x 844 phone."""
    from playwright.sync_api import expect

    received, hook_url = hook
    url = contest["url"]
    eid, token = contest["one"]
    shots = shots_dir(contest["tmp"])
    ctx, page, errors = open_dashboard(browser, url, eid, token)
    before = contest["one_answers"]
    expect(page.locator("#n-answers")).to_have_text(f"{before:,}")  # thousands separated
    assert page.is_hidden("#done-banner") and page.is_visible("#stopping #on-done")
    assert page.text_content("#on-done-title") == "When the learner stops"
    # the stopping progress in words (the description when the server gives one) and as a bar
    res = api(url, token, f"/api/experiments/{eid}/results?limit=1")
    if res["stopping"].get("description"):
        expect(page.locator("#stopping-description")).to_have_text(res["stopping"]["description"])
    assert page.is_visible("#progress") and page.text_content("#progress-text").startswith(
        f"{round(100 * res['stopping']['fraction'])}%")
    # on-done settings: a bad URL is refused with the server's reason, then saved
    page.fill("#webhook-url", "ftp://example.org/x")
    page.click("#on-done-save")
    expect(page.locator("#on-done-message")).to_contain_text("Not saved")
    page.check("#auto-stop")
    page.fill("#webhook-url", hook_url)
    page.click("#on-done-save")
    expect(page.locator("#on-done-message")).to_have_text("Saved.")
    expect(page.locator("#webhook-status")).to_have_text("The webhook has not been called yet.")
    # the new URL's signing secret is shown this once (43 characters: 32 random bytes), never by the results
    expect(page.locator("#webhook-secret-value")).to_have_text(re.compile(r"^[A-Za-z0-9_-]{43}$"))
    assert "webhook_secret" not in api(url, token, f"/api/experiments/{eid}/results?limit=1")["on_done"]
    on_done = api(url, token, f"/api/experiments/{eid}/results?limit=1")["on_done"]
    assert on_done["auto_stop"] is True and on_done["webhook_url"] == hook_url
    # the last answers: the learner stops
    n = answer_until_done(url, eid)
    assert 0 < n < 500
    banner = page.locator("#done-banner")
    expect(banner).to_be_visible()
    res = api(url, token, f"/api/experiments/{eid}/results?limit=1")
    stop = res["learner_done"]
    assert res["done"] and stop["at_answers"] == res["n_answers"] == before + n
    text = page.text_content("#done-text")
    assert re.match(rf"The learner stopped after {stop['at_answers']} answers at .+: its recommendation is ",
                    text), text
    assert res["recommendation"][0]["text"] in page.text_content("#done-text strong")
    # auto-stop stopped the experiment; the webhook was called once and the banner says so
    expect(page.locator("#status")).to_have_text("stopped (learner done)", timeout=15_000)
    expect(page.locator("#done-text")).to_contain_text("The experiment is stopped.")
    assert page.is_hidden("#done-stop")
    expect(page.locator("#webhook-status")).to_contain_text("HTTP 200, delivered.", timeout=20_000)
    assert len(received) == 1 and received[0]["experiment_id"] == eid
    assert page.locator("#done-banner #on-done").count() == 1  # the settings moved into the banner
    assert page.is_checked("#auto-stop") and page.input_value("#webhook-url") == hook_url
    # the charts catch up with the stop (fetched again once the results changed, at most every 5 s)
    points = api(url, token, f"/api/experiments/{eid}/history")["series"][0]["points"]
    assert points[-1]["done"] and points[-1]["n_answers"] == stop["at_answers"]
    expect(page.locator("#chart-progress")).to_have_attribute("data-rows", str(len(points)), timeout=15_000)
    # the progress rose to 100 % and the margin crossed 0
    margins = [p["margin"] for p in points if p["margin"] is not None]
    assert points[-1]["fraction"] == 1.0 and 0 < points[len(points) // 2]["fraction"] < 0.9, points[-1]
    assert margins[0] < -1 and margins[-1] >= 0, margins
    expected = {"chart-leaders-0", "chart-progress", "chart-margin", "chart-timeline", "chart-allocation",
                "chart-participants", "chart-response"}
    charts = wait_for_charts(page, sorted(expected))
    assert_charts_drawn(charts, expected, ratio=1)
    assert page.text_content("#margin-note") == ""
    shot_to(page, shots / "dashboard.png", "#ranking tbody tr:nth-child(5)")
    assert errors == []
    ctx.close()
    # the same on a phone: the banner first, nothing wider than the screen
    ctx, page, errors = open_dashboard(browser, url, eid, token, width=390, height=844, scale=2,
                                       is_mobile=True, has_touch=True)
    expect(page.locator("#done-banner")).to_be_visible()
    wait_for_charts(page, sorted(expected))
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shots / "dashboard-phone.png"))
    assert errors == []
    ctx.close()
    publish(shots, "dashboard.png", "dashboard-phone.png")


def test_network_cut_is_said_and_the_dashboard_recovers(browser, contest):
    """With the network cut the page says the connection is lost and keeps what it shows (charts included);
    once it is back the message goes and the answers given meanwhile appear."""
    from playwright.sync_api import expect

    url = contest["url"]
    eid, token = contest["two"]
    ctx, page, errors = open_dashboard(browser, url, eid, token, width=390, height=844, is_mobile=True)
    wait_for_charts(page, ["chart-timeline", "chart-allocation"])

    def total() -> int:  # both learners' answers, from the comparison table
        return sum(int(x) for x in page.locator("#comparison-table td.n-answers").all_text_contents())

    expect(page.locator("#comparison-table td.n-answers")).to_have_count(2)
    before = total()
    ctx.set_offline(True)
    expect(page.locator("#error")).to_contain_text("Connection lost", timeout=10_000)
    given = 0
    with httpx.Client(base_url=url) as c:  # answers arrive meanwhile
        while given < 3:
            pid = c.post("/api/participants").json()["participant_id"]
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            if q["state"] == "ok":
                r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": "funny"})
                assert r.status_code == 200
                given += 1
    page.wait_for_timeout(1500)
    assert page.is_visible("#ranking tbody tr") and total() == before  # what it showed stays
    assert int(page.get_attribute("#chart-timeline", "data-rows")) > 0
    assert "Connection lost" in page.text_content("#error")
    ctx.set_offline(False)
    expect(page.locator("#error")).to_have_text("", timeout=10_000)
    deadline = time.monotonic() + 10
    while total() != before + 3 and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert total() == before + 3
    assert errors == []
    ctx.close()


def test_bokehjs_is_served_from_the_installed_package(contest):
    """The dashboard loads BokehJS from the installed ``bokeh`` (never a copy in this repository): versioned
    URLs kept a year by browsers, only the allow-listed bundles."""
    import bokeh

    url, version = contest["url"], bokeh.__version__
    page = HTTP.get(f"{url}/dashboard/1").text
    for name in ("bokeh.min.js", "bokeh-api.min.js"):
        assert f'<script src="/static/bokeh/{version}/{name}"></script>' in page
        r = HTTP.get(f"{url}/static/bokeh/{version}/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert r.headers["x-content-type-options"] == "nosniff" and len(r.content) > 50_000
    for path in ("0.0.1/bokeh.min.js", f"{version}/bokeh-widgets.min.js", f"{version}/compiler.js",
                 f"{version}/..%2F..%2F__init__.py", f"{version}/lib"):
        assert HTTP.get(f"{url}/static/bokeh/{path}").status_code == 404, path


def test_contest_size_counts_fit_a_phone_and_answers_per_item_is_on_a_log_scale(browser, contest):
    """What a contest of a million answers changes on the dashboard, on a 390 x 844 phone: counts carry
    thousands separators and no tile is narrower than its number; answers per item are on a log axis (an
    adaptive learner gives its leaders hundreds of times the answers of the rest); and answers without
    history points (a database from before the history) are said to be so, not "nothing yet". The
    server's answers are rewritten in flight to those of a contest of 1,234,567 answers."""
    import json

    from playwright.sync_api import expect

    eid, token = contest["two"]

    def big(route):
        body = route.fetch().json()
        body["n_answers"] = 1_234_567
        route.fulfill(json=body)

    def no_points(route):
        body = route.fetch().json()
        for s in body["series"]:
            s["points"] = []
        route.fulfill(body=json.dumps(body), content_type="application/json")

    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    page.route(f"**/api/experiments/{eid}/results*", big)
    page.route(f"**/api/experiments/{eid}/history*", no_points)
    page.goto(f"{contest['url']}/dashboard/{eid}#token={token}")
    expect(page.locator("#n-answers")).to_have_text("1,234,567")
    tiles = page.eval_on_selector_all(".stats > div", "(ds) => ds.map((d) => [d.scrollWidth, d.clientWidth])")
    assert tiles and all(scroll <= client for scroll, client in tiles), tiles
    expect(page.locator("#chart-leaders")).to_have_attribute("data-rows", "0", timeout=15_000)
    note = page.locator("#chart-progress").evaluate("(b) => b.previousElementSibling.textContent")
    assert note.startswith("No points for the 1,234,567 answers so far"), note
    scale = page.evaluate("""() => { const box = document.getElementById('chart-allocation');
        const v = Object.values(Bokeh.index).find((v) => v.model.type === 'Figure' && box.contains(v.el));
        return v.model.y_scale.type; }""")
    assert scale == "LogScale"
    # the page polls on: a handler still fetching when the context closes would raise in the next test's calls
    page.unroute_all(behavior="ignoreErrors")
    ctx.close()


def test_a_refused_export_says_why(browser, contest):
    """A download the server turns away (it streams at most a few at once) shows the server's reason."""
    from playwright.sync_api import expect

    eid, token = contest["one"]
    ctx, page, errors = open_dashboard(browser, contest["url"], eid, token)
    busy = {"detail": "3 downloads are already being streamed by this server; retry in a few seconds"}
    page.route(f"**/api/experiments/{eid}/answers.csv", lambda route: route.fulfill(
        status=429, json=busy, headers={"Retry-After": "5"}))
    page.click("#export-answers")
    expect(page.locator("#error")).to_have_text("export failed: " + busy["detail"])
    assert errors == []
    ctx.close()
