"""Access control: owner tokens (401, hashed at rest, constant-time comparison), participants' reach, rate limits."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

import purebandits.service.owners as study_mod
from conftest import HTTP
from purebandits.service.app import create_app
from purebandits.service.errors import BadRequest
from purebandits.service.settings import Settings, normalize_url
from purebandits.service.validation import check_image_url

ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(5)]
OWNER_ROUTES = [("GET", ""), ("GET", "/results"), ("GET", "/state"), ("GET", "/answers.csv"),
                ("GET", "/summary.csv"), ("GET", "/participants.csv"), ("GET", "/comparison"), ("POST", "/pause"),
                ("POST", "/resume"), ("POST", "/stop"), ("POST", "/archive"), ("DELETE", "")]


def _setup(c: TestClient, n: int = 2):
    exps = []
    for j in range(n):
        r = c.post("/api/experiments", json={"name": f"e{j}", "items": ITEMS, "seed": j})
        assert r.status_code == 201
        exps.append((r.json()["id"], r.json()["owner_token"]))
    pid = c.post("/api/participants").json()["participant_id"]
    for eid, _ in exps:  # some data worth stealing
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert c.post(f"/api/queries/{q['query_id']}/answer",
                      json={"participant_id": pid, "label": "funny"}).status_code == 200
    return exps, pid


def test_owner_endpoints_refuse_missing_wrong_and_foreign_tokens(db_url):
    with TestClient(create_app(Settings(database_url=db_url, ask_rate_per_second=0))) as c:
        (e1, t1), (e2, t2) = _setup(c)[0]
        pid = c.post("/api/participants").json()["participant_id"]
        bad_headers = {
            "missing": {},
            "empty bearer": {"Authorization": "Bearer "},
            "wrong token": {"Authorization": "Bearer " + "x" * 32},
            "other experiment's token": {"Authorization": f"Bearer {t2}"},
            "token with another scheme": {"Authorization": f"Basic {t1}"},
            "token without scheme": {"Authorization": t1},
            "token prefix": {"Authorization": f"Bearer {t1[:-1]}"},
            "token plus suffix": {"Authorization": f"Bearer {t1}x"},
            "participant id as token": {"Authorization": f"Bearer {pid}"},
            "token hash as token": {"Authorization": f"Bearer {hashlib.sha256(t1.encode()).hexdigest()}"},
        }
        for method, suffix in OWNER_ROUTES:
            for why, headers in bad_headers.items():
                r = c.request(method, f"/api/experiments/{e1}{suffix}", headers=headers)
                assert r.status_code == 401, (method, suffix, why, r.status_code)
                assert set(r.json()) == {"detail"} and r.headers["www-authenticate"] == "Bearer"
            # an unknown experiment looks the same as a wrong token (no existence oracle)
            r = c.request(method, f"/api/experiments/987654{suffix}", headers={"Authorization": f"Bearer {t1}"})
            assert r.status_code == 401
        # nothing changed: still active, the right token works
        ok = c.get(f"/api/experiments/{e1}", headers={"Authorization": f"Bearer {t1}"})
        assert ok.status_code == 200 and ok.json()["status"] == "active"


def test_tokens_are_stored_hashed(db_url):
    with TestClient(create_app(Settings(database_url=db_url, ask_rate_per_second=0))) as c:
        exps, _ = _setup(c)
    engine = sa.create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            dump = []
            for table in ("experiments", "items", "participants", "queries", "events", "snapshots"):
                dump += [repr(tuple(r)) for r in conn.exec_driver_sql(f"SELECT * FROM {table}")]
            stored = dict(conn.exec_driver_sql("SELECT id, owner_token_hash FROM experiments").all())
    finally:
        engine.dispose()
    text = "\n".join(dump)
    for eid, token in exps:
        assert token not in text  # the token itself is nowhere in the database
        assert stored[eid] == hashlib.sha256(token.encode()).hexdigest()


def test_tokens_are_compared_in_constant_time(sqlite_url, monkeypatch):
    """Every owner check goes through hmac.compare_digest on equal-length digests."""
    calls = []
    real = study_mod.hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    with TestClient(create_app(Settings(database_url=sqlite_url, admin_token="adm1n"))) as c:
        r = c.post("/api/experiments", json={"items": ITEMS}, headers={"Authorization": "Bearer adm1n"})
        eid, token = r.json()["id"], r.json()["owner_token"]
        monkeypatch.setattr(study_mod.hmac, "compare_digest", spy)
        for tok in ("short", token, "y" * 500, "adm1n"):
            c.get(f"/api/experiments/{eid}", headers={"Authorization": f"Bearer {tok}"})
        for tok in ("short", "y" * 500):  # creating experiments with a wrong admin token
            assert c.post("/api/experiments", json={"items": ITEMS},
                          headers={"Authorization": f"Bearer {tok}"}).status_code == 401
    assert len(calls) >= 6
    assert all(a == b == 64 for a, b in calls)  # SHA-256 hex digests: the length never depends on the guess


def test_participants_cannot_reach_results_exports_or_other_experiments(db_url):
    with TestClient(create_app(Settings(database_url=db_url, ask_rate_per_second=0))) as c:
        (e1, _t1), (e2, _t2) = _setup(c)[0]
        pid = c.post("/api/participants").json()["participant_id"]
        other = c.post("/api/participants").json()["participant_id"]
        # the participant's only view of an experiment: name, labels, status, the organizer's
        # instructions and context image — no counts, no items
        pub = c.get(f"/api/experiments/{e1}/public").json()
        assert set(pub) == {"id", "name", "query", "labels", "status", "instructions", "image_url",
                            "answers_per_participant", "allow_skip", "complete",
                            "example"}  # example: an item's text, which any participant sees
        for method, suffix in OWNER_ROUTES:
            assert c.request(method, f"/api/experiments/{e1}{suffix}").status_code == 401
            assert c.request(method, f"/api/experiments/{e1}{suffix}",
                             headers={"Authorization": f"Bearer {pid}"}).status_code == 401
        # a query of experiment 2 cannot be answered by another participant, nor with a made-up id
        q = c.post(f"/api/experiments/{e2}/queries", json={"participant_id": pid}).json()
        for who in (other, "", "x" * 36):
            r = c.post(f"/api/queries/{q['query_id']}/answer", json={"participant_id": who, "label": "funny"})
            assert r.status_code == 403, (who, r.text)
        # the dashboard page carries no data (it reads the token from the URL fragment)
        html = c.get(f"/dashboard/{e1}").text
        assert "caption 0" not in html and "funny" not in html.replace("funny:", "")
        # a query response reveals only the item to rate
        q1 = c.post(f"/api/experiments/{e1}/queries", json={"participant_id": pid}).json()
        assert set(q1) <= {"state", "query_id", "experiment_id", "item", "labels", "expires_at", "n_answered"}
        assert set(q1["item"]) <= {"id", "text", "image_url"}


@pytest.mark.parametrize("rate,burst", [(0.001, 4), (0.001, 1)])
def test_asks_are_rate_limited_per_participant(sqlite_url, rate, burst):
    with TestClient(create_app(Settings(database_url=sqlite_url, ask_rate_per_second=rate,
                                        ask_burst=burst))) as c:
        eid = c.post("/api/experiments", json={"items": ITEMS * 1 + [{"text": f"more {i}"} for i in range(40)]}
                     ).json()["id"]
        a, b = (c.post("/api/participants").json()["participant_id"] for _ in range(2))
        codes = [c.post(f"/api/experiments/{eid}/queries", json={"participant_id": a}).status_code
                 for _ in range(burst + 2)]
        assert codes == [200] * burst + [429, 429]
        r = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": a})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "slow down" in r.json()["detail"]
        # another participant has its own bucket
        assert c.post(f"/api/experiments/{eid}/queries", json={"participant_id": b}).status_code == 200
        # refused asks issue nothing, and a participant's repeated asks get its one pending query
        res = c.app.state.study.results(eid)
        assert res["n_pending"] == 2


def test_rate_limit_is_configurable_from_the_environment(sqlite_url):
    s = Settings.from_env({"PUREBANDITS_ASK_RATE_PER_SECOND": "0.001", "PUREBANDITS_ASK_BURST": "2",
                           "PUREBANDITS_DATABASE_URL": sqlite_url})
    assert (s.ask_rate_per_second, s.ask_burst) == (0.001, 2.0)
    with TestClient(create_app(s)) as c:
        eid = c.post("/api/experiments", json={"items": ITEMS}).json()["id"]
        pid = c.post("/api/participants").json()["participant_id"]
        codes = [c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).status_code
                 for _ in range(3)]
        assert codes == [200, 200, 429]
    off = Settings.from_env({"PUREBANDITS_ASK_RATE_PER_SECOND": "0", "PUREBANDITS_DATABASE_URL": sqlite_url})
    with TestClient(create_app(off)) as c:
        eid = c.post("/api/experiments", json={"items": [f"t{i}" for i in range(60)]}).json()["id"]
        pid = c.post("/api/participants").json()["participant_id"]
        assert all(c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).status_code == 200
                   for _ in range(50))


def test_minting_participant_ids_is_rate_limited_per_address(sqlite_url):
    """New ids are limited per client address, so minting ids cannot get around the per-participant ask limit."""
    s = Settings(database_url=sqlite_url, participant_rate_per_second=0.001, participant_burst=3)
    with TestClient(create_app(s)) as c:
        codes = [c.post("/api/participants").status_code for _ in range(5)]
        assert codes == [201, 201, 201, 429, 429]
        r = c.post("/api/participants", json={"participant_id": "W1"})
        assert r.status_code == 429 and "new participant ids from this address" in r.json()["detail"]
        assert int(r.headers["retry-after"]) >= 1


# ---------------------------------------------------------------------------------------------- issue #23
GOOD_IMAGE_URLS = ["/static/cartoon.png", "/img/1.png?v=2#x", "https://example.org/a.png", "http://example.org:8080/a",
                   "HTTPS://EXAMPLE.ORG/A.PNG", "https://[::1]/a.png", "/x\" onerror=\"window.__xss=1",
                   "/caption images/\u00e9t\u00e9.png"]
BAD_IMAGE_URLS = {
    "//evil.example/x.png": "protocol-relative", "///evil.example/x.png": "protocol-relative",
    "javascript:alert(1)": "no javascript:", "JavaScript:alert(1)": "no javascript:",
    " javascript:alert(1)": "no javascript:", "java\tscript:alert(1)": "non-printable",
    "data:image/png;base64,iVBORw0KGgo=": "no javascript:, data:", "vbscript:x": "no javascript:",
    "file:///etc/passwd": "no javascript:", "ftp://evil.example/x": "no javascript:",
    "\\\\evil.example\\x.png": "backslashes", "/\\evil.example/x.png": "backslashes",
    "http:\\\\evil.example": "backslashes", "http:evil.example/x": "no javascript:",
    "https:///x.png": "no host", "http://user:pw@evil.example/x.png": "credentials",
    "http://evil.example@good.example/x.png": "credentials", "/x.png\n": "non-printable",
    "/x\u202e.png": "non-printable", "/\x00": "control characters", "/a\ud800": "lone surrogate",
    "http://[evil.example/x.png": "not a valid URL", "https://x/" + "a" * 2_000: "at most 2000", "": "http(s) URL",
    "x.png": "no javascript:",
}


def test_image_urls_are_http_or_root_relative_only():
    """Issue #23 A(2): an item's image_url is an absolute http(s) URL or a path starting with a single '/'."""
    for url in GOOD_IMAGE_URLS:
        assert check_image_url(url, "image_url") == url
    for url, fragment in BAD_IMAGE_URLS.items():
        with pytest.raises(BadRequest) as info:
            check_image_url(url, "item 0: 'image_url'")
        assert fragment in info.value.message and "\n" not in info.value.message, (url, info.value.message)
        assert info.value.message.startswith("item 0: 'image_url'")


def test_image_urls_are_checked_in_json_items_and_in_csv(sqlite_url):
    with TestClient(create_app(Settings(database_url=sqlite_url)), raise_server_exceptions=False) as c:
        for url in ("//evil.example/x.png", "/\\evil.example/x.png", "javascript:alert(1)", "data:,x"):
            for body in ({"items": [{"text": "a", "image_url": url}, "b"]},
                         {"items_csv": f'text,image_url\na,"{url}"\nb,\n'}):
                r = c.post("/api/experiments", json=body)
                assert r.status_code == 422 and "image_url" in r.json()["detail"], (url, r.text)
        r = c.post("/api/experiments", json={"items": [{"text": "a", "image_url": "/static/a.png"},
                                                       {"text": "b", "image_url": "https://example.org/b.png"}]})
        assert r.status_code == 201


def test_participant_ids_a_spreadsheet_would_run_are_refused(sqlite_url):
    """The exports put participant ids in CSV cells; an id starting with '=', '+', '-' or '@' is a formula there."""
    with TestClient(create_app(Settings(database_url=sqlite_url, ask_rate_per_second=0,
                                        participant_rate_per_second=0, create_rate_per_second=0))) as c:
        eid = c.post("/api/experiments", json={"items": ITEMS}).json()["id"]
        for pid in ("=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(1+9)", "=HYPERLINK(\"http://x\")"):
            r = c.post("/api/participants", json={"participant_id": pid})
            assert r.status_code == 422 and "formula" in r.json()["detail"], (pid, r.text)
            assert c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).status_code == 403
        for pid in ("A1B2C3D4E5", "5f3a9c2b1d4e6f7a8b9c0d1e", "worker-7", "a=b", "x@y"):
            assert c.post("/api/participants", json={"participant_id": pid}).status_code == 201, pid


def test_live_server_refuses_every_probe_class_with_4xx_and_logs_no_traceback(server_cls, tmp_path):
    """The outside probe's inputs against a real ``purebandits serve`` (uvicorn, the fast path, the JSON parser):
    each a 4xx, and the server's stderr holds no traceback and at most one line per request."""
    db = f"sqlite:///{tmp_path / 'probe.sqlite'}"
    srv = server_cls(db, log_dir=tmp_path)
    with srv:
        base = srv.url
        eid = HTTP.post(f"{base}/api/experiments", json={"items": ITEMS}).json()["id"]
        pid = HTTP.post(f"{base}/api/participants").json()["participant_id"]
        qid = HTTP.post(f"{base}/api/experiments/{eid}/queries", json={"participant_id": pid}).json()["query_id"]
        ask, ans, create, reg = (f"/api/experiments/{eid}/queries", f"/api/queries/{qid}/answer", "/api/experiments",
                                 "/api/participants")
        deep_list, deep_obj = b"[" * 1200 + b"]" * 1200, b'{"a":' * 1200 + b"1" + b"}" * 1200
        spec = b'{"items": ["a", "b"], '
        probes = [
            (ask, b'{"participant_id": "\\ud800"}'), (ans, b'{"participant_id": "\\udfff", "label": "funny"}'),
            (ans, b'{"participant_id": "' + pid.encode() + b'", "label": "\\ud800"}'),
            (reg, b'{"participant_id": "a\\ud800"}'), (create, b'{"items": ["a\\ud800", "b"]}'),
            (create, spec + b'"name": "\\udc00"}'),
            (create, spec + b'"labels": [{"name": "\\ud800", "reward": 0}, {"name": "b", "reward": 1}]}'),
            *[(path, body) for path in (ask, ans, create, reg) for body in (deep_list, deep_obj)],
            *[(create, spec + b'"labels": [{"name": "a", "reward": ' + n + b'}, {"name": "b", "reward": 0}]}')
              for n in (b"1e308", b"-1e308", b"1e400", b"NaN", b"Infinity", b"1180591620717411303424")],
            *[(create, spec + b'"' + key + b'": ' + n + b"}") for key in (b"k", b"delta", b"budget", b"seed")
              for n in (b"1e400", b"NaN", b"1180591620717411303424", b"-1e308")],
            (create, spec + b'"params": {"delta": 1e400}}'),
            (create, spec + b'"params": {"N": 1180591620717411303424}}'),
            (create, spec + b'"algorithms": [{"algorithm": "lucb1", "share": 1e308}, '
                            b'{"algorithm": "lucb1", "label": "b", "share": 1e308}]}'),
            (ask, b'{"participant_id": 1e400}'), (ans, b'{"participant_id": NaN, "label": "funny"}'),
            (create, b'{"items": ["' + b"x" * 1_000_000 + b'", "b"]}'),
            (create, b'{"items_csv": "text\\n' + b"x" * 200_000 + b'\\nb\\n"}'),
            (ask, b'{"participant_id": "' + b"p" * 100_000 + b'"}'),
            *[(create, b'{"items": [{"text": "a", "image_url": "' + u + b'"}, "b"]}')
              for u in (b"//evil.example/x.png", b"javascript:alert(1)", b"data:,x", b"\\\\\\\\evil\\\\x",
                        b"/\\\\evil.example")],
            *[(reg, b'{"participant_id": "' + f.encode() + b'"}') for f in ("=cmd|' /C calc'!A0", "+1", "-1", "@A1")],
            (ask, b'{"participant_id": "=cmd|\' /C calc\'!A0"}'),
            (ans, b"\xff\xfe\x00 not utf-8"),
        ]
        for path, body in probes:
            r = HTTP.post(base + path, content=body, headers={"Content-Type": "application/json"}, timeout=30)
            assert 400 <= r.status_code < 500, (path, body[:60], r.status_code, r.text[:200])
            assert isinstance(r.json()["detail"], str) and "\n" not in r.json()["detail"]
        # the pending query survived all of it
        assert HTTP.post(base + ans, json={"participant_id": pid, "label": "funny"}).status_code == 200
    log = (tmp_path / f"server-{srv.port}.log").read_text(errors="replace")
    for marker in ("Traceback", "Exception in ASGI application", "--- Logging error ---", "Fatal Python error"):
        assert marker not in log, log[-3000:]
    assert len(log.splitlines()) <= len(probes), log[-3000:]
