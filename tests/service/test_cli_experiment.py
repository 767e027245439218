"""``purebandits experiment``: the HTTP client sub-commands against a live ``purebandits serve`` (SQLite and
PostgreSQL), the local ``token`` recovery, and the option parsing and error paths that need no server."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import socket
import struct
import subprocess
import sys
import zlib
from contextlib import nullcontext
from pathlib import Path

import httpx
import pytest

from conftest import HTTP
from purebandits.cli import main
from purebandits.service.cli_experiment import image_payload, parse_arm, parse_labels, parse_param

SRC = str(Path(__file__).resolve().parents[2] / "src")
ITEMS_CSV = "id,text\n" + "".join(f"c{i},\"caption {i}, with a comma\"\n" for i in range(8))
LABELS = ["unfunny", "somewhat funny", "funny"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tiny_png(width: int = 3, height: int = 2) -> bytes:
    """A valid RGB PNG of ``width`` x ``height`` pixels, built from raw bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``purebandits experiment ARGV`` in-process: (exit code, stdout, stderr)."""
    code = main(["experiment", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def created(out: str) -> tuple[int, str]:
    """(id, owner token) from ``create``'s output."""
    eid = int(re.search(r"created experiment (\d+)", out).group(1))
    token = re.search(r"owner token:\s+(\S+)", out).group(1)
    return eid, token


def answer_some(url: str, eid: int, n: int, n_participants: int = 3, seed: int = 0) -> list[str]:
    """Register participants and answer ``n`` queries round-robin; returns the participant ids."""
    with httpx.Client(base_url=url, timeout=10) as c:
        pids = [c.post("/api/participants").json()["participant_id"] for _ in range(n_participants)]
        done = 0
        i = 0
        while done < n:
            pid = pids[i % n_participants]
            i += 1
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            if q["state"] != "ok":
                assert i < 20 * n, q
                continue
            label = q["labels"][(done * 7 + seed) % len(q["labels"])]
            r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": pid, "label": label})
            assert r.status_code == 200, r.text
            done += 1
    return pids


class FakeTTY(io.StringIO):
    """Standard input that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No server or token from the caller's environment; run in tmp_path (default export file names land there)."""
    for var in ("PUREBANDITS_SERVER", "PUREBANDITS_TOKEN", "PUREBANDITS_DATABASE_URL", "PUREBANDITS_ADMIN_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


# ---------------------------------------------------------------------------- live server
def test_one_learner_lifecycle_exports_errors_and_token_recovery(shared_server_on, tmp_path, capsys, env):
    """(On the module's server of each backend: everything here is about experiments of the test's own.)"""
    items = tmp_path / "contest 900.csv"
    items.write_text(ITEMS_CSV, encoding="utf-8")
    db_url = shared_server_on.db_url
    with nullcontext(shared_server_on) as srv:
        env.setenv("PUREBANDITS_SERVER", srv.url)  # the default server comes from the environment

        # create: URLs, token, and the warning that the token is shown once
        code, out, err = run_cli(capsys, "create", "--items", items, "--algorithm", "lil_ucb",
                                 "--param", "preset=heuristic", "--delta", "0.1", "--seed", "3")
        assert code == 0, err
        eid, token = created(out)
        assert f"participant URL: {srv.url}/rate/{eid}" in out
        assert f"dashboard URL:   {srv.url}/dashboard/{eid}#token={token}" in out
        assert "contest 900" in out  # default name: the CSV file's name
        assert "shown only this once" in err

        # --json: the raw response
        code, out, err = run_cli(capsys, "create", "--items", items, "--name", "second", "--json")
        assert code == 0, err
        assert set(json.loads(out)) >= {"id", "owner_token", "participant_url", "dashboard_url"}

        # show, human and JSON; the token from the environment
        env.setenv("PUREBANDITS_TOKEN", token)
        code, out, err = run_cli(capsys, "show", eid)
        assert code == 0, err
        assert f"experiment {eid}: contest 900" in out and "active" in out and "lil_ucb" in out
        assert "unfunny=0, somewhat funny=0.5, funny=1" in out
        code, out, _ = run_cli(capsys, "show", eid, "--json")
        info = json.loads(out)
        assert info["n_items"] == 8 and info["seed"] == 3
        assert info["params"]["preset"] == "heuristic" and info["params"]["delta"] == 0.1

        answer_some(srv.url, eid, 12)

        # results: table, stopping line, --top, --json
        code, out, err = run_cli(capsys, "results", eid, "--top", "3")
        assert code == 0, err
        assert "answers: 12" in out and "stopping: " in out and "recommended: " in out
        table = out.split("RANK", 1)[1].splitlines()
        assert len([line for line in table[1:] if re.match(r"\s*\d+\*?\s+c\d", line)]) == 3
        assert "5 more" in out
        code, out, _ = run_cli(capsys, "results", eid, "--json")
        res = json.loads(out)
        assert res["n_answers"] == 12 and len(res["ranking"]) == 8

        # pause / resume: participants see it
        code, out, _ = run_cli(capsys, "pause", eid)
        assert (code, out.strip()) == (0, f"experiment {eid}: paused")
        pid = HTTP.post(srv.url + "/api/participants").json()["participant_id"]
        q = HTTP.post(f"{srv.url}/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["state"] == "paused"
        code, out, _ = run_cli(capsys, "resume", eid, "--json")
        assert code == 0 and json.loads(out) == {"id": eid, "status": "active"}

        # exports: explicit file, the server's file name, stdout
        code, out, err = run_cli(capsys, "export", eid, "--what", "answers", "-o", tmp_path / "a.csv")
        assert code == 0, err
        assert "(12 rows)" in out
        rows = read_csv(tmp_path / "a.csv")
        assert len(rows) == 12 and {r["label"] for r in rows} <= set(LABELS)
        assert {r["item_id"] for r in rows} <= {f"c{i}" for i in range(8)}
        code, out, err = run_cli(capsys, "export", eid, "--what", "summary")
        assert code == 0, err
        name = re.search(r"wrote (\S+) \(8 rows\)", out).group(1)
        summary = read_csv(tmp_path / name)
        assert sum(int(r["count"]) for r in summary) == 12
        assert {r["caption"] for r in summary} == {f"caption {i}, with a comma" for i in range(8)}
        code, out, _ = run_cli(capsys, "export", eid, "--what", "answers", "-o", "-")
        assert code == 0 and out.startswith("seq,query_id,participant_id,") and len(out.splitlines()) == 13

        # errors: the server's message and status on stderr, exit 1, no traceback
        code, out, err = run_cli(capsys, "create", "--items", items, "--algorithm", "no_such_learner")
        assert code == 1 and out == ""
        assert err.startswith("error: ") and "no_such_learner" in err and "(HTTP 422)" in err
        code, _, err = run_cli(capsys, "create", "--items", items, "--algorithm", "lil_ucb", "--param", "delta=7")
        assert code == 1 and "delta" in err and "(HTTP 422)" in err
        code, _, err = run_cli(capsys, "show", eid, "--token", "not-the-token")
        assert code == 1 and err.startswith("error: ") and "(HTTP 401)" in err
        env.delenv("PUREBANDITS_TOKEN")
        code, _, err = run_cli(capsys, "results", eid)
        assert code == 1 and "(HTTP 401)" in err and "--token" in err  # with a hint
        env.setenv("PUREBANDITS_TOKEN", token)

        # token recovery (local, on the database): the old token stops working, the new one works
        code, out, err = run_cli(capsys, "token", eid, "--db", db_url)
        assert code == 0, err
        new = re.search(rf"new owner token for experiment {eid} \(contest 900\): (\S+)", out).group(1)
        assert new != token and "no longer works" in err
        code, _, err = run_cli(capsys, "show", eid)
        assert code == 1 and "(HTTP 401)" in err
        env.setenv("PUREBANDITS_TOKEN", new)
        code, out, err = run_cli(capsys, "show", eid)
        assert code == 0 and "contest 900" in out, err
        code, _, err = run_cli(capsys, "token", "9999", "--db", db_url)
        assert code == 1 and "experiment 9999 does not exist" in err

        # stop is final: resume gets the server's 409; server and token also work before the action
        code, out, _ = run_cli(capsys, "stop", eid)
        assert (code, out.strip()) == (0, f"experiment {eid}: stopped")
        env.delenv("PUREBANDITS_SERVER")
        env.delenv("PUREBANDITS_TOKEN")
        # --token=T: a token may start with '-'
        code, _, err = run_cli(capsys, "--server", srv.url, f"--token={new}", "resume", eid)
        assert code == 1 and err.startswith("error: ") and "(HTTP 409)" in err


def test_two_learners_image_list_archive_delete(db_url, server_cls, tmp_path, capsys, env):
    items = tmp_path / "targets.csv"
    items.write_text(ITEMS_CSV, encoding="utf-8")
    png = tiny_png()
    (tmp_path / "cartoon.png").write_bytes(png)
    admin = "admin-secret-token"
    with server_cls(db_url, env={"PUREBANDITS_ADMIN_TOKEN": admin}, log_dir=tmp_path) as srv:
        env.setenv("PUREBANDITS_SERVER", srv.url)
        argv = ["create", "--items", items, "--image", tmp_path / "cartoon.png", "--instructions",
                "Rate how funny the caption is.", "--name", "side by side",
                "--arm", "LilUCB:lil_ucb:0.5:preset=heuristic", "--arm", "RandomSampling:random_sampling:0.5",
                "--labels", "no=0,meh=0.5,yes=1", "--repeats", "not_consecutive",
                "--answers-per-participant", "6", "--seed", "11"]
        # the server has an admin token: creating needs it
        code, _, err = run_cli(capsys, *argv)
        assert code == 1 and "(HTTP 401)" in err
        code, out, err = run_cli(capsys, *argv, "--token", admin)
        assert code == 0, err
        eid, token = created(out)
        env.setenv("PUREBANDITS_TOKEN", token)

        code, out, err = run_cli(capsys, "show", eid)
        assert code == 0, err
        assert "LilUCB" in out and "RandomSampling" in out and "random_sampling" in out
        assert "context image:" in out and "Rate how funny" in out and "not_consecutive" in out
        info = json.loads(run_cli(capsys, "show", eid, "--json")[1])
        assert [a["label"] for a in info["algorithms"]] == ["LilUCB", "RandomSampling"]
        assert [a["share"] for a in info["algorithms"]] == [0.5, 0.5]
        assert info["has_image"] is True and info["answers_per_participant"] == 6
        assert [lab["name"] for lab in info["labels"]] == ["no", "meh", "yes"]
        public = HTTP.get(f"{srv.url}/api/experiments/{eid}/public").json()
        assert public["instructions"] == "Rate how funny the caption is."
        image = HTTP.get(srv.url + public["image_url"])
        assert image.status_code == 200 and image.content == png
        assert image.headers["content-type"].startswith("image/png")

        # list: admin only on this server
        code, out, err = run_cli(capsys, "list", "--token", admin)
        assert code == 0, err
        line = next(line for line in out.splitlines() if line.split()[0] == str(eid))
        assert "side by side" in line and "LilUCB,RandomSampling" in line and "active" in line
        listed = json.loads(run_cli(capsys, "list", "--token", admin, "--json")[1])["experiments"]
        assert [e["id"] for e in listed] == [eid]
        code, _, err = run_cli(capsys, "list")  # the owner token is not the admin token
        assert code == 1 and "(HTTP 401)" in err

        answer_some(srv.url, eid, 30, n_participants=6)

        # results per learner
        code, out, err = run_cli(capsys, "results", eid, "--algorithm", "RandomSampling", "--top", "0")
        assert code == 0, err
        assert "learner RandomSampling (random_sampling" in out and "learners: LilUCB, RandomSampling" in out
        first = json.loads(run_cli(capsys, "results", eid, "--json")[1])
        second = json.loads(run_cli(capsys, "results", eid, "--json", "--algorithm", "RandomSampling")[1])
        assert (first["algorithm_label"], second["algorithm_label"]) == ("LilUCB", "RandomSampling")
        assert first["n_answers"] + second["n_answers"] == 30
        code, _, err = run_cli(capsys, "results", eid, "--algorithm", "Nope")
        assert code == 1 and err.startswith("error: ") and "Nope" in err

        # exports: the per-learner summary's file name, participants, answers of one learner
        code, out, err = run_cli(capsys, "export", eid, "--what", "summary", "--algorithm", "RandomSampling")
        assert code == 0, err
        assert f"wrote {eid}_summary_RandomSampling.csv (8 rows)" in out
        summary = read_csv(tmp_path / f"{eid}_summary_RandomSampling.csv")
        assert sum(int(r["count"]) for r in summary) == second["n_answers"]
        code, out, err = run_cli(capsys, "export", eid, "--what", "participants", "-o", tmp_path / "p.csv")
        assert code == 0, err
        parts = read_csv(tmp_path / "p.csv")
        assert len(parts) == 6 and sum(int(p["answers"]) for p in parts) == 30
        assert {p["algorithm"] for p in parts} <= {"LilUCB", "RandomSampling"}
        code, out, err = run_cli(capsys, "export", eid, "--what", "answers", "--algorithm", "LilUCB",
                                 "-o", tmp_path / "a.csv")
        assert code == 0, err
        rows = read_csv(tmp_path / "a.csv")
        assert len(rows) == first["n_answers"] and {r["algorithm"] for r in rows} <= {"LilUCB"}

        # archive: read-only and final
        code, out, _ = run_cli(capsys, "archive", eid)
        assert (code, out.strip()) == (0, f"experiment {eid}: archived")
        pid = HTTP.post(srv.url + "/api/participants").json()["participant_id"]
        q = HTTP.post(f"{srv.url}/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert q["state"] == "archived"
        code, _, err = run_cli(capsys, "resume", eid)
        assert code == 1 and "(HTTP 409)" in err
        assert run_cli(capsys, "results", eid)[0] == 0  # still readable

        # delete: refused without a terminal and without --yes; then gone
        code, _, err = run_cli(capsys, "delete", eid)
        assert code == 2 and "--yes" in err
        env.setattr(sys, "stdin", FakeTTY("n\n"))  # on a terminal it asks; anything but y/yes keeps it
        code, out, err = run_cli(capsys, "delete", eid)
        assert code == 1 and "[y/N]" in out and "not deleted" in err
        assert run_cli(capsys, "show", eid)[0] == 0
        env.setattr(sys, "stdin", FakeTTY("y\n"))
        code, out, err = run_cli(capsys, "delete", eid)
        assert code == 0 and out.endswith(f"experiment {eid}: deleted\n"), err
        eid2, _ = created(run_cli(capsys, *argv, "--token", admin)[1])
        code, out, err = run_cli(capsys, "delete", eid2, "--yes", "--token", admin)
        assert (code, out.strip()) == (0, f"experiment {eid2}: deleted"), err
        code, _, err = run_cli(capsys, "show", eid, "--token", admin)
        assert code == 1 and ("(HTTP 404)" in err or "(HTTP 401)" in err)
        assert json.loads(run_cli(capsys, "list", "--token", admin, "--json")[1]) == {"experiments": []}


# ---------------------------------------------------------------------------- no server
def test_create_pairwise_with_query_option(shared_server, tmp_path, capsys, env):
    """``--query pairwise`` creates a pairwise experiment (two items per query, answered left or right), which
    ``show`` names; without it the experiment is a rating one. (On the module's SQLite server.)"""
    items = tmp_path / "duels.csv"
    items.write_text(ITEMS_CSV, encoding="utf-8")
    with nullcontext(shared_server) as srv:
        env.setenv("PUREBANDITS_SERVER", srv.url)
        code, out, err = run_cli(capsys, "create", "--items", items, "--query", "pairwise", "--seed", "3")
        assert code == 0, err
        eid, token = created(out)
        public = HTTP.get(f"{srv.url}/api/experiments/{eid}/public").json()
        assert public["query"] == "pairwise" and public["labels"] == ["left", "right"]
        code, out, err = run_cli(capsys, "show", eid, "--token", token)
        assert code == 0 and re.search(r"query\s*:?\s+pairwise", out), out
        code, out, err = run_cli(capsys, "create", "--items", items)
        assert code == 0, err
        eid, _ = created(out)
        assert HTTP.get(f"{srv.url}/api/experiments/{eid}/public").json()["query"] == "rating"
        code, _, err = run_cli(capsys, "create", "--items", items, "--query", "pairwise", "--labels", "a=0,b=1")
        assert code != 0 and "labels" in err


def test_create_ratings_then_comparisons_and_show_its_stages(shared_server, tmp_path, capsys, env):
    """``--query rating_then_pairwise --top-m 3 --ratings-budget 10`` creates a staged experiment; ``show`` prints
    its stages: stage 1 running with its current top 3, then, past the ratings budget, stage 2 running over a top 3
    said to be unproven. Missing or inconsistent options exit 2 before any request, in the server's words; what
    only the server can check (--top-m against the item count) is its 422, exit 1. (On the module's SQLite
    server.)"""
    items = tmp_path / "staged.csv"
    items.write_text(ITEMS_CSV, encoding="utf-8")
    base = ["create", "--items", items, "--query", "rating_then_pairwise"]
    with nullcontext(shared_server) as srv:
        env.setenv("PUREBANDITS_SERVER", srv.url)
        code, out, err = run_cli(capsys, *base, "--top-m", "3", "--ratings-budget", "10", "--seed", "4")
        assert code == 0, err
        eid, token = created(out)
        info = HTTP.get(f"{srv.url}/api/experiments/{eid}", headers={"Authorization": f"Bearer {token}"}).json()
        assert info["query"] == "rating_then_pairwise" and info["stages"]["top_m"] == 3
        assert info["stages"]["ratings_budget"] == 10
        code, out, err = run_cli(capsys, "show", eid, "--token", token)
        assert code == 0, err
        assert re.search(r"stage:\s+1 of 2 \(ratings\)", out), out
        assert re.search(r"top m:\s+3 \(ratings budget 10\)", out) and "current top m (not final)" in out
        assert "stage 2:" not in out and "winner:" not in out
        answer_some(srv.url, eid, 10)
        code, out, err = run_cli(capsys, "show", eid, "--token", token)
        assert code == 0, err
        child = HTTP.get(f"{srv.url}/api/experiments/{eid}",
                          headers={"Authorization": f"Bearer {token}"}).json()["stages"]["stage2_experiment_id"]
        assert re.search(r"stage:\s+2 of 2 \(comparisons\)", out), out
        assert "not proven: taken at the ratings budget after 10 ratings" in out
        assert re.search(rf"stage 2:\s+experiment {child}, 0 comparisons, running", out), out
        code, out, err = run_cli(capsys, "show", child, "--token", token)
        assert code == 0 and f"this is stage 2 (the comparisons) of experiment {eid}" in out, out
        code, out, err = run_cli(capsys, *base, "--top-m", "8")  # 8 items: only the server knows
        assert code == 1 and "top_m must be an integer in [2, 7]" in err, err
    # before any request (no server at this address): exit 2 with the server's words
    env.setenv("PUREBANDITS_SERVER", "http://127.0.0.1:9")
    for extra, message in (([], "needs top_m (--top-m)"),
                           (["--top-m", "1"], "top_m (--top-m) must be an integer of at least 2"),
                           (["--top-m", "3", "--ratings-budget", "0"], "ratings_budget (--ratings-budget) must be"),
                           (["--top-m", "3", "--k", "3"], "k (what stage 2 finds among the top_m)"),
                           (["--top-m", "3", "--budget", "50"], "'ratings_budget' (--ratings-budget) ends stage 1"),
                           (["--top-m", "3", "--arm", "A:lil_ucb"], "one learner per stage")):
        code, _, err = run_cli(capsys, *base, *extra)
        assert code == 2 and message in err, (extra, err)
    for query in ("rating", "pairwise"):
        code, _, err = run_cli(capsys, "create", "--items", items, "--query", query, "--top-m", "3")
        assert code == 2 and "for --query rating_then_pairwise only" in err, err


def test_show_prints_the_winner_of_a_staged_experiment(capsys):
    """Once stage 2 has stopped, ``show`` names the winner, and says when stage 1's top m was not proven."""
    from purebandits.service.cli_experiment import _show_stages

    stages = {"stage": 2, "top_m": 3, "ratings_budget": None, "delta": 0.05, "stage_delta": 0.025,
              "stage1": {"top_m": ["c0", "c1", "c2"], "answers": 900, "proven": True, "reason": "stopped"},
              "stage2": {"experiment_id": 9, "answers": 120, "done": True, "recommendation": ["c0"]},
              "winner": "c0", "proven": True}
    _show_stages(stages)
    out = capsys.readouterr().out
    assert "proven (its learner stopped) after 900 ratings: c0, c1, c2" in out
    assert re.search(r"stage 2:\s+experiment 9, 120 comparisons, stopped; recommendation: c0", out)
    assert re.search(r"winner:\s+c0\n", out) and "(no ratings budget)" in out
    _show_stages({**stages, "proven": False, "ratings_budget": 500,
                  "stage1": {**stages["stage1"], "answers": 500, "proven": False, "reason": "ratings_budget"}})
    out = capsys.readouterr().out
    assert "not proven: taken at the ratings budget after 500 ratings" in out
    assert "winner:" in out and "c0 (among an unproven top m)" in out


def test_server_down_gives_a_clear_message(capsys, env):
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run_cli(capsys, "show", "1", "--server", url, "--token", "t")
    assert code == 1 and out == ""
    assert err.startswith(f"error: cannot reach the purebandits server at {url}: connection refused")
    # the real entry point: the same message, never a traceback
    proc = subprocess.run([sys.executable, "-m", "purebandits.cli", "experiment", "list", "--server", url],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert proc.returncode == 1
    assert "cannot reach the purebandits server" in proc.stderr and "Traceback" not in proc.stderr


def test_token_without_a_database(capsys, env, tmp_path):
    code, _, err = run_cli(capsys, "token", "1")  # default: purebandits.sqlite in the working directory
    assert code == 1 and "no database at" in err and str(tmp_path) in err
    assert not (tmp_path / "purebandits.sqlite").exists()


def test_option_parsing():
    assert parse_arm("LilUCB:lil_ucb:0.5") == {"label": "LilUCB", "algorithm": "lil_ucb", "share": 0.5}
    assert parse_arm("A:lil_ucb:2:preset=heuristic,delta=0.1") == {
        "label": "A", "algorithm": "lil_ucb", "share": 2.0, "params": {"preset": "heuristic", "delta": 0.1}}
    assert parse_arm(":lucb1:k=3,weights=[1,2]") == {"algorithm": "lucb1", "params": {"k": 3, "weights": [1, 2]}}
    assert parse_arm("B:ts") == {"label": "B", "algorithm": "ts"}
    assert parse_param("flag=true") == ("flag", True)
    assert parse_param("name=a b") == ("name", "a b")
    assert parse_param("x=null") == ("x", None)
    assert parse_labels("unfunny=0, somewhat funny=0.5,funny=1") == [
        {"name": "unfunny", "reward": 0.0}, {"name": "somewhat funny", "reward": 0.5}, {"name": "funny", "reward": 1.0}]


def test_bad_options_exit_2_before_any_request(capsys, env, tmp_path):
    items = tmp_path / "i.csv"
    items.write_text(ITEMS_CSV, encoding="utf-8")
    # a server that does not exist: these must fail before trying to reach it
    base = ["create", "--server", "http://127.0.0.1:9", "--items", items]
    for extra, message in ((["--arm", "nolabel"], "expected LABEL:ALGORITHM"),
                           (["--arm", "A:lil_ucb:half"], "share 'half' is not a number"),
                           (["--param", "delta"], "not KEY=VALUE"),
                           (["--labels", "a=0,b=x"], "reward of 'b' is not a number"),
                           (["--image", tmp_path / "missing.png"], "cannot read image")):
        code, _, err = run_cli(capsys, *base, *extra)
        assert code == 2 and message in err, (extra, err)
    (tmp_path / "x.txt").write_text("not an image")
    code, _, err = run_cli(capsys, *base, "--image", tmp_path / "x.txt")
    assert code == 2 and "not a PNG, JPEG, GIF or WebP" in err
    code, _, err = run_cli(capsys, "create", "--items", tmp_path / "nope.csv")
    assert code == 2 and "cannot read items file" in err
    with pytest.raises(SystemExit):  # argparse: --algorithm and --arm exclude each other
        main(["experiment", "create", "--items", str(items), "--algorithm", "lil_ucb", "--arm", "A:lil_ucb"])
    code, _, err = run_cli(capsys, "delete", "3", "--server", "http://127.0.0.1:9")
    assert code == 2 and "pass --yes" in err


def test_image_types(tmp_path):
    png = tmp_path / "c.bin"
    png.write_bytes(tiny_png())
    assert image_payload(png) == {"content_type": "image/png", "data": base64.b64encode(tiny_png()).decode()}
    jpg = tmp_path / "c.png"  # magic bytes win over the extension
    jpg.write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 20)
    assert image_payload(jpg)["content_type"] == "image/jpeg"
    webp = tmp_path / "c.webp"
    webp.write_bytes(b"RIFF\x10\0\0\0WEBPVP8 " + b"\0" * 8)
    assert image_payload(webp)["content_type"] == "image/webp"
    gif = tmp_path / "c.gif"
    gif.write_bytes(b"GIF89a" + b"\0" * 10)
    assert image_payload(gif)["content_type"] == "image/gif"


def test_client_retries_503_and_reports_details():
    """The HTTP client alone, against a scripted stdlib server: 503s are retried, error details surface."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from purebandits.service.client import ApiError, ServiceClient, filename_from_disposition

    script = {"/flaky": [(503, b'{"detail": "database unavailable, retry shortly"}')] * 2 + [(200, b'{"ok": 1}')],
              "/down": [(503, b'{"detail": "database unavailable, retry shortly"}')] * 10,
              "/html": [(502, b"<html>bad gateway</html>")]}
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            status, body = script[self.path].pop(0)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        api = ServiceClient(f"127.0.0.1:{httpd.server_address[1]}", retries=3, backoff=0.01)
        assert api.get("/flaky") == {"ok": 1} and seen.count("/flaky") == 3
        with pytest.raises(ApiError) as exc:
            api.get("/down")
        assert exc.value.status == 503 and seen.count("/down") == 4
        assert str(exc.value) == "database unavailable, retry shortly (HTTP 503)"
        with pytest.raises(ApiError) as exc:
            api.get("/html")
        assert str(exc.value) == "Bad Gateway (HTTP 502)"
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert filename_from_disposition('attachment; filename="3_summary_A.csv"') == "3_summary_A.csv"
    assert filename_from_disposition('attachment; filename="../../etc/passwd"') == "passwd"
    assert filename_from_disposition("inline") is None
