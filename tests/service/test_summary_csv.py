"""summary.csv through the HTTP API: the public caption-contest columns plus ``item_id`` for the
default labels, per-label count columns and the mean reward for other label sets, hostile item ids.

The experiments use ``uniform_allocation`` with a budget of 4 answers per item: it hands the items
out round-robin, so every item gets exactly 4 answers, and each item's answers are a fixed script
of labels -- every figure below is computed by hand from the script.
"""

from __future__ import annotations

import csv
import io
import math

import pytest
from fastapi.testclient import TestClient

from purebandits.instances.real import load_caption_summary
from purebandits.service.app import create_app
from purebandits.service.settings import Settings

PUBLIC = ["rank", "funny", "somewhat_funny", "unfunny", "count", "score", "precision", "contest", "caption"]
PER_ITEM = 4


def make_client(url: str) -> TestClient:
    return TestClient(create_app(Settings(database_url=url)))


def participant(client) -> str:
    r = client.post("/api/participants")
    assert r.status_code == 201
    return r.json()["participant_id"]


def create(client, items, labels=None, name="summary test"):
    body = {"name": name, "items": items, "seed": 3, "algorithm": "uniform_allocation",
            "params": {"budget": PER_ITEM * len(items)}}
    if labels is not None:
        body["labels"] = labels
    r = client.post("/api/experiments", json=body)
    assert r.status_code == 201, r.text
    d = r.json()
    return d["id"], {"Authorization": f"Bearer {d['owner_token']}"}


def run(client, eid, script: dict[str, list[str]]) -> None:
    """Answer queries until every item's script is used up: the k-th answer to item x is script[x][k]."""
    given = {x: 0 for x in script}
    for _ in range(sum(len(s) for s in script.values())):
        pid = participant(client)  # a fresh participant each time: no repeat rule gets in the way
        q = client.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["state"] == "ok", q
        x = q["item"]["id"]
        label = script[x][given[x]]
        given[x] += 1
        r = client.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
        assert r.status_code == 200, r.text
    assert given == {x: len(s) for x, s in script.items()}


def download(client, eid, auth) -> tuple[str, list[list[str]]]:
    r = client.get(f"/api/experiments/{eid}/summary.csv", headers=auth)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    return r.text, list(csv.reader(io.StringIO(r.text)))


def test_default_labels_public_columns_plus_item_id(sqlite_url, tmp_path):
    items = [{"id": "a", "text": "first caption"}, {"id": "b", "text": "second, with a comma"}]
    with make_client(sqlite_url) as c:
        eid, auth = create(c, items)
        _, rows = download(c, eid, auth)
        # item_id right after rank; every public column keeps its name and their order
        assert rows[0] == ["rank", "item_id", *PUBLIC[1:]]
        assert [col for col in rows[0] if col != "item_id"] == PUBLIC
        # nothing answered yet: counts 0, empty score and precision, items in item order
        assert {r[1] for r in rows[1:]} == {"a", "b"}
        for r in rows[1:]:
            assert r[2:8] == ["0", "0", "0", "0", "", ""]

        run(c, eid, {"a": ["funny", "funny", "somewhat funny", "unfunny"],
                     "b": ["unfunny", "unfunny", "unfunny", "somewhat funny"]})
        text, rows = download(c, eid, auth)
    h = rows[0]
    by_id = {r[h.index("item_id")]: dict(zip(h, r, strict=True)) for r in rows[1:]}
    # a: scores 3, 3, 2, 1 -> mean 9/4; squared deviations .5625 + .5625 + .0625 + 1.5625 = 2.75
    a = by_id["a"]
    assert (a["rank"], a["funny"], a["somewhat_funny"], a["unfunny"], a["count"]) == ("1", "2", "1", "1", "4")
    assert float(a["score"]) == pytest.approx(2.25, rel=1e-12)
    assert float(a["precision"]) == pytest.approx(math.sqrt(2.75 / 3) / 2, rel=1e-12)
    # b: scores 1, 1, 1, 2 -> mean 1.25; squared deviations 3 * .0625 + .5625 = .75 -> std .5
    b = by_id["b"]
    assert (b["rank"], b["funny"], b["somewhat_funny"], b["unfunny"], b["count"]) == ("2", "0", "1", "3", "4")
    assert float(b["score"]) == pytest.approx(1.25, rel=1e-12)
    assert float(b["precision"]) == pytest.approx(0.25, rel=1e-12)
    assert {r["contest"] for r in by_id.values()} == {"summary test"}
    assert by_id["b"]["caption"] == "second, with a comma"
    # a reader of the public format (it goes by column name) reads the file as it is
    path = tmp_path / f"{eid}_summary.csv"
    path.write_text(text, encoding="utf-8")
    cc = load_caption_summary(path)
    assert cc.captions == ["first caption", "second, with a comma"] and cc.contest == "summary test"
    assert cc.votes.tolist() == [[1, 1, 2], [3, 1, 0]]  # unfunny, somewhat funny, funny


def test_default_labels_in_another_order_are_still_the_public_format(sqlite_url):
    items = [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]
    labels = [{"name": "funny", "reward": 1}, {"name": "unfunny", "reward": 0},
              {"name": "somewhat funny", "reward": 0.5}]
    with make_client(sqlite_url) as c:
        eid, auth = create(c, items, labels)
        run(c, eid, {"a": ["funny", "funny", "funny", "unfunny"], "b": ["somewhat funny"] * 4})
        _, rows = download(c, eid, auth)
    assert rows[0] == ["rank", "item_id", *PUBLIC[1:]]
    assert [r[:8] for r in rows[1:]] == [["1", "a", "3", "0", "1", "4", "2.5", rows[1][7]],
                                         ["2", "b", "0", "4", "0", "4", "2.0", "0.0"]]
    # a: scores 3, 3, 3, 1 -> mean 2.5, squared deviations 3 * .25 + 2.25 = 3 -> std 1
    assert float(rows[1][7]) == pytest.approx(0.5, rel=1e-12)


def test_custom_labels_get_a_count_column_each_and_the_mean_reward(sqlite_url):
    items = [{"id": "a", "text": "first"}, {"id": "b", "text": "second"}]
    labels = [{"name": "bad", "reward": 0}, {"name": "ok", "reward": 1}, {"name": "great", "reward": 3},
              {"name": "Not sure", "reward": 1}]
    with make_client(sqlite_url) as c:
        eid, auth = create(c, items, labels, name="custom")
        run(c, eid, {"a": ["great", "great", "ok", "Not sure"], "b": ["bad", "bad", "bad", "great"]})
        _, rows = download(c, eid, auth)
    assert rows[0] == ["rank", "item_id", "bad", "ok", "great", "not_sure", "count", "mean_reward", "precision",
                       "contest", "caption"]
    # a: rewards 3, 3, 1, 1 -> mean 2, squared deviations 4 * 1 -> std sqrt(4/3)
    # b: rewards 0, 0, 0, 3 -> mean .75, squared deviations 3 * .5625 + 5.0625 = 6.75 -> std 1.5
    assert [r[:7] for r in rows[1:]] == [["1", "a", "0", "1", "2", "1", "4"], ["2", "b", "3", "0", "1", "0", "4"]]
    assert float(rows[1][7]) == 2.0 and float(rows[2][7]) == 0.75  # in reward units, not 1..3
    assert float(rows[1][8]) == pytest.approx(math.sqrt(4 / 3) / 2, rel=1e-12)
    assert float(rows[2][8]) == pytest.approx(0.75, rel=1e-12)
    assert [r[9:] for r in rows[1:]] == [["custom", "first"], ["custom", "second"]]


def test_label_columns_are_safe_and_unique(sqlite_url):
    items = [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]
    # "Great!" and "great" meet at "great"; "Count" and "caption" would shadow fixed columns; "=1+2" must not
    # start a header cell with a formula; "★" has no letter or digit left; the default names with other rewards
    labels = [{"name": "great", "reward": 2}, {"name": "Great!", "reward": 2}, {"name": "Count", "reward": 1},
              {"name": "caption", "reward": 1}, {"name": "=1+2", "reward": 0}, {"name": "★", "reward": 0},
              {"name": "Très  drôle", "reward": 3}]
    with make_client(sqlite_url) as c:
        eid, auth = create(c, items, labels)
        _, rows = download(c, eid, auth)
        assert rows[0] == ["rank", "item_id", "great", "great_2", "count_2", "caption_2", "1_2", "label_6",
                           "très_drôle", "count", "mean_reward", "precision", "contest", "caption"]
        # the caption contest's names with other rewards are another label set
        eid, auth = create(c, items, [{"name": "unfunny", "reward": 0}, {"name": "somewhat funny", "reward": 1},
                                      {"name": "funny", "reward": 2}])
        _, rows = download(c, eid, auth)
        assert rows[0] == ["rank", "item_id", "unfunny", "somewhat_funny", "funny", "count", "mean_reward",
                           "precision", "contest", "caption"]


def test_item_ids_with_commas_and_formulas_are_quoted_and_neutralised(sqlite_url):
    items = [{"id": '=HYPERLINK("http://x")', "text": "+1 caption"}, {"id": "a,b", "text": "plain"},
             {"id": "@sum", "text": "-dash, and comma"}]
    with make_client(sqlite_url) as c:
        eid, auth = create(c, items)
        run(c, eid, {'=HYPERLINK("http://x")': ["funny"] * 4, "a,b": ["somewhat funny"] * 4,
                     "@sum": ["unfunny"] * 4})
        text, rows = download(c, eid, auth)
    assert [r[1] for r in rows[1:]] == ["'=HYPERLINK(\"http://x\")", "a,b", "'@sum"]
    assert [r[-1] for r in rows[1:]] == ["'+1 caption", "plain", "'-dash, and comma"]
    assert '"a,b"' in text and '"\'=HYPERLINK(""http://x"")"' in text
    for row in rows:
        assert not any(cell[:1] in ("=", "+", "@", "\t", "\r") for cell in row), row
        assert len(row) == len(rows[0])


def test_a_negative_mean_reward_stays_a_number(sqlite_url):
    items = [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]
    labels = [{"name": "awful", "reward": -2}, {"name": "fine", "reward": 0}]
    with make_client(sqlite_url) as c:
        eid, auth = create(c, items, labels)
        run(c, eid, {"a": ["awful", "fine", "fine", "fine"], "b": ["awful"] * 4})
        _, rows = download(c, eid, auth)
    assert rows[0][2:6] == ["awful", "fine", "count", "mean_reward"]
    # a: rewards -2, 0, 0, 0 -> mean -.5, squared deviations 2.25 + 3 * .25 = 3 -> std 1; b: all -2
    assert rows[1:] == [["1", "a", "1", "3", "4", "-0.5", "0.5", "summary test", "x"],
                        ["2", "b", "4", "0", "4", "-2.0", "0.0", "summary test", "y"]]
