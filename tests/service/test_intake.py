"""Intake of an organizer's items file (issue #36, item 4): a published caption-contest summary taken as it is
(``target_id`` becomes the item id), blank captions refused by file line or left out with a count, errors that
name the file's line, non-UTF-8 bytes refused by the API as by the CLI, the number of items created confirmed,
and a stray quote that joins rows caught.

API tests run on the FastAPI TestClient; the CLI tests on one ``purebandits serve`` for the module.
"""

from __future__ import annotations

import base64
import csv
import io
import re
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

import purebandits
from purebandits.cli import main
from purebandits.service.app import create_app
from purebandits.service.settings import Settings

#: a bundled public summary (contest 558, 3,925 captions; the public files of that time have no target_id)
SUMMARY_558 = Path(purebandits.__file__).parent / "data" / "caption_contest" / "558_summary_LilUCB.csv"
#: the bundled summary of contest 559's random-sampling run: every caption ends with a line break inside
#: its quotes, so each of its 138 rows spans two lines of the file
SUMMARY_559 = Path(purebandits.__file__).parent / "data" / "caption_contest" / "559_summary_RandomSamping.csv"
#: the columns of a newer published summary: the public ones with the caption's target_id first
PUBLISHED = ["target_id", "rank", "funny", "somewhat_funny", "unfunny", "count", "score", "precision", "contest",
             "caption"]


def published_summary(n: int, blank: tuple[int, ...] = (), raw: dict[int, str] | None = None,
                      plain_after: int | None = None) -> tuple[str, list[dict[str, str]]]:
    """A summary in the published layout (``target_id`` first) of the first ``n`` captions of contest 558, as a
    spreadsheet or pandas writes it (quotes only where needed, ``\\n`` line ends). The captions at the 0-based
    rows ``blank`` are left blank; ``raw`` puts text in the file as it is, unquoted, in place of a row's caption
    (the captions of a data row ``i`` are on the file's line ``i + 2``); ``plain_after``: the captions of the
    rows after it lose their quotes and commas (so that nothing there closes a stray quote). Returns the
    file's text and its rows."""
    with SUMMARY_558.open(newline="", encoding="utf-8") as f:
        rows = [dict(r) for _, r in zip(range(n), csv.DictReader(f), strict=False)]
    for i, r in enumerate(rows):
        r["target_id"] = str(7000 + 3 * i)  # made up: ids that are not the row's position
        if i in blank:
            r["caption"] = ""
        if plain_after is not None and i > plain_after:
            r["caption"] = r["caption"].replace('"', "").replace(",", "")
        if raw and i in raw:
            r["caption"] = f"RAW{i}RAW"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=PUBLISHED, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    text = buf.getvalue()
    for i, caption in (raw or {}).items():
        text = text.replace(f"RAW{i}RAW", caption)
    return text, rows


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'intake.sqlite'}",
                                        create_rate_per_second=0))) as c:
        yield c


def create(client: TestClient, **body) -> httpx.Response:
    return client.post("/api/experiments", json={"name": "intake", "seed": 3, **body})


def item_ids(client: TestClient, created: dict) -> list[str]:
    auth = {"Authorization": f"Bearer {created['owner_token']}"}
    res = client.get(f"/api/experiments/{created['id']}/results", headers=auth, params={"timeline": "false"})
    assert res.status_code == 200, res.text
    return [r["id"] for r in res.json()["ranking"]]


def n_experiments(client: TestClient) -> int:
    return len(client.get("/api/experiments").json()["experiments"])


# ---------------------------------------------------------------------------- a published summary as it is
def test_a_published_summary_as_it_is_keeps_its_target_ids_and_the_count_is_confirmed(client):
    text, rows = published_summary(60)
    r = create(client, items_csv=text)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["n_items"] == 60 and created["skipped_blank"] == 0
    assert sorted(item_ids(client, created)) == sorted(row["target_id"] for row in rows)
    info = client.get(f"/api/experiments/{created['id']}",
                      headers={"Authorization": f"Bearer {created['owner_token']}"}).json()
    assert info["n_items"] == 60


def test_a_summary_with_line_breaks_inside_its_captions_is_read_as_it_is(client):
    """Contest 559's random-sampling summary: 138 captions on 277 lines (a line break inside each caption's
    quotes) is not a stray quote; each caption is kept, without the break."""
    r = create(client, items_csv=SUMMARY_559.read_text(encoding="utf-8"))
    assert r.status_code == 201, r.text
    assert r.json()["n_items"] == 138


def test_our_own_summary_export_reads_back_with_its_item_ids(client):
    """The service's summary.csv (``rank,item_id,...,caption``) is an items file too: ids kept."""
    r = create(client, items=[{"id": f"c{i}", "text": f"caption {i}"} for i in range(5)])
    auth = {"Authorization": f"Bearer {r.json()['owner_token']}"}
    summary = client.get(f"/api/experiments/{r.json()['id']}/summary.csv", headers=auth).text
    again = create(client, items_csv=summary)
    assert again.status_code == 201, again.text
    assert sorted(item_ids(client, again.json())) == [f"c{i}" for i in range(5)]


# ---------------------------------------------------------------------------- blank captions
def test_a_blank_caption_is_refused_by_its_file_line(client):
    text, _ = published_summary(20, blank=(6,))  # row 6 is the file's line 8 (line 1 is the header)
    r = create(client, items_csv=text)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert re.search(r"\bline 8\b", detail) and "blank" in detail and "skip_blank" in detail, detail
    assert n_experiments(client) == 0


def test_blank_captions_are_left_out_with_a_count_when_asked(client):
    text, rows = published_summary(20, blank=(0, 6))
    r = create(client, items_csv=text, skip_blank=True)
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["n_items"] == 18 and created["skipped_blank"] == 2
    assert created["skipped_blank_lines"] == [2, 8]
    kept = {row["target_id"] for i, row in enumerate(rows) if i not in (0, 6)}
    assert set(item_ids(client, created)) == kept


# ---------------------------------------------------------------------------- errors name the file's line
@pytest.mark.parametrize("text, line, words", [
    ("id,text\na,first\nb,second\nc,third\nb,fourth\n", None, r"duplicate item id 'b' \(lines 3 and 5\)"),
    ("text\nfine\nfine too\n" + "x" * 2001 + "\n", 4, "at most 2000"),
    ("text,image_url\na,/ok.png\nb,javascript:alert(1)\n", 3, "image_url"),
    ("text\na\nb\nc\u0000d\n", 4, "control characters"),
    # a comma in an unquoted caption: one field more than the header
    ("id,text\n1,first\n2,Honey, I shrunk the budget\n", 3, "3 fields, the header has 2"),
], ids=["duplicate id", "text too long", "bad image_url", "control character", "comma in an unquoted caption"])
def test_errors_name_the_files_line(client, text, line, words):
    r = create(client, items_csv=text)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert re.search(words, detail), detail
    if line is not None:
        assert detail.startswith(f"items_csv: line {line}:"), detail
    assert not re.search(r"\bitem \d+\b", detail), detail  # not a 0-based position in the list


# ---------------------------------------------------------------------------- a stray quote
STRAY = '"Honey, I shrunk the budget'  # a caption that opens a quote and never closes it


@pytest.mark.parametrize("raw, plain_after, why", [
    # nothing closes it: the rest of the file became one caption
    ({10: STRAY}, 10, r"^items_csv: line 12: a quote opens a field here and is never closed"),
    # the opening quote of a later quoted caption closes it, and text follows
    ({10: STRAY, 11: "one", 12: "two", 13: "three", 14: '"Fine, mom."'}, None,
     r"^items_csv: line 12: a quote opens a field here and closes only on line 16"),
    # a later caption that ends in a quote closes it cleanly: the joined rows parse, only their lines show it
    ({10: '"Honey I shrunk the budget', 11: "plain caption", 12: 'He said ""no"" to the budget"'}, None,
     r"^items_csv: line 12: .*lines 12-14 were read as one row.*line 13 is a row of its own"),
], ids=["never closed", "closed by a quoted caption", "closed cleanly"])
def test_a_stray_quote_that_joins_rows_is_caught(client, raw, plain_after, why):
    text, _ = published_summary(30, raw=raw, plain_after=plain_after)
    r = create(client, items_csv=text)
    assert r.status_code == 422, r.text
    assert re.search(why, r.json()["detail"]), r.json()["detail"]
    assert n_experiments(client) == 0


def test_an_unescaped_quote_inside_a_quoted_caption_is_named(client):
    r = create(client, items_csv='id,text\n1,first\n2,"He said "hi" to me"\n3,third\n')
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("items_csv: line 3: text follows the closing quote of a quoted field: "
                                         'a quote inside a quoted field is written twice'), r.json()["detail"]


# ---------------------------------------------------------------------------- the file's bytes
LATIN1 = "id,caption\n1,Caf\u00e9 society\n2,\u00bfQu\u00e9 pasa?\n3,plain\n".encode("latin-1")


def test_the_files_bytes_are_taken_and_non_utf8_is_refused_by_line(client):
    r = create(client, items_csv_base64=base64.b64encode(LATIN1).decode("ascii"))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "not UTF-8" in detail and re.search(r"\bline 2\b", detail), detail
    assert n_experiments(client) == 0
    good = ("\ufeff" + LATIN1.decode("latin-1")).encode("utf-8")  # a byte-order mark, as spreadsheets write it
    r = create(client, items_csv_base64=base64.b64encode(good).decode("ascii"))
    assert r.status_code == 201, r.text
    assert r.json()["n_items"] == 3
    info = client.get(f"/api/experiments/{r.json()['id']}/results",
                      headers={"Authorization": f"Bearer {r.json()['owner_token']}"}).json()
    assert {row["text"] for row in info["ranking"]} == {"Caf\u00e9 society", "\u00bfQu\u00e9 pasa?", "plain"}


def test_items_csv_base64_must_be_base64_and_not_with_items_csv(client):
    r = create(client, items_csv_base64="not base64 at all!")
    assert r.status_code == 422 and "base64" in r.json()["detail"], r.text
    r = create(client, items_csv="text\na\nb\n", items_csv_base64=base64.b64encode(b"text\na\nb\n").decode())
    assert r.status_code == 422 and "not both" in r.json()["detail"], r.text


# ---------------------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from conftest import Server

    tmp = tmp_path_factory.mktemp("intake-cli")
    with Server(f"sqlite:///{tmp / 'cli.sqlite'}", log_dir=tmp) as srv:
        yield srv


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(["experiment", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cli_env(monkeypatch, tmp_path, server):
    for var in ("PUREBANDITS_TOKEN", "PUREBANDITS_DATABASE_URL", "PUREBANDITS_ADMIN_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PUREBANDITS_SERVER", server.url)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_confirms_the_number_of_items_created(cli_env, capsys):
    path = cli_env / "contest.csv"
    text, _ = published_summary(40, blank=(5,))
    path.write_text(text, encoding="utf-8")
    code, out, err = run_cli(capsys, "create", "--items", path, "--seed", "1")
    assert code == 1 and "line 7" in err and "--skip-blank" in err, (out, err)
    code, out, err = run_cli(capsys, "create", "--items", path, "--seed", "1", "--skip-blank")
    assert code == 0, err
    assert re.search(r"created experiment \d+: contest \(39 items; 1 blank caption left out: line 7\)", out), out


@pytest.mark.slow  # a CLI process and a server
def test_cli_refuses_non_utf8_as_the_server_does(cli_env, capsys, client):
    path = cli_env / "latin1.csv"
    path.write_bytes(LATIN1)
    code, out, err = run_cli(capsys, "create", "--items", path)
    assert code == 2, (out, err)
    server_says = create(client, items_csv_base64=base64.b64encode(LATIN1).decode()).json()["detail"]
    # the same words, after the name of the file
    assert err.strip() == f"error: {server_says.replace('the items file', f'the items file {str(path)!r}', 1)}", \
        (err, server_says)
