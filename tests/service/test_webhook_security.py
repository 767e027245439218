"""Webhooks cannot reach inside (issue 41): internal addresses refused when set and when called, the call
pinned to the address it checked, every failure recorded once in coarse words (a non-HTTP answer
included) without stopping the sweep, bounded time, no redirects, signed calls checked with the service
guide's own verification code, and webhooks off by default on a server without an admin token.

Nothing here connects outside the machine: public addresses are only checked, never called, except
through :data:`purebandits.service.webhooks.create_connection` sent to a local receiver.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from study_support import Clock, open_study

from purebandits.service import webhooks
from purebandits.service.app import create_app
from purebandits.service.done_hooks import DoneHooks
from purebandits.service.errors import BadRequest, Forbidden
from purebandits.service.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"
LOCAL = {"webhooks": True, "webhook_allow_internal": True}  # for receivers on the loopback
PUBLIC_IP = "93.184.215.14"

INTERNAL = ["127.0.0.1", "localhost", "0.0.0.0", "127.1", "2130706433", "0x7f.1", "[::1]", "[::ffff:127.0.0.1]",
            "10.0.0.1", "192.168.1.1", "172.16.0.1", "169.254.169.254", "[fe80::1]", "224.0.0.1", "100.64.0.1",
            "[::]", "[fc00::1]", "[2002:7f00:1::1]", "[64:ff9b::a00:1]", "[::127.0.0.1]", "255.255.255.255"]


def _spec(budget: int = 5) -> dict:
    return {"name": "webhook test", "seed": 3, "algorithm": "uniform_allocation", "params": {"budget": budget},
            "items": [{"id": str(i), "text": f"caption {i}"} for i in range(3)]}


def _finish(study, eid: int, clock: Clock) -> None:
    """Answer until the experiment's learner stops."""
    for _ in range(100):
        pid = study.new_participant()
        for _ in range(20):
            q = study.next_query(eid, pid)
            if q["state"] in ("done", "stopped"):
                return
            if q["state"] != "ok":
                break
            clock.ms += 1000
            study.answer(q["query_id"], pid, "funny")
    raise AssertionError("the learner did not stop")


def _call(study, eid: int) -> dict:
    return study.results(eid)["on_done"]["webhook"]


# ---------------------------------------------------------------- receivers on the loopback
class _Receiver(BaseHTTPRequestHandler):
    calls: list[dict]
    status = 200
    location: str | None = None

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls.append({"path": self.path, "headers": self.headers, "body": body})
        self.send_response(type(self).status)
        if type(self).location:
            self.send_header("Location", type(self).location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    """An HTTP receiver on 127.0.0.1: (its handler class, with ``calls``; its port)."""
    handler = type("Receiver", (_Receiver,), {"calls": [], "status": 200, "location": None})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield handler, srv.server_address[1]
    srv.shutdown()
    srv.server_close()


class RawServer:
    """A TCP server on 127.0.0.1 that answers each connection with ``behave(conn)``; counts connections."""

    def __init__(self, behave) -> None:
        self.behave, self.connections = behave, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.closing = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            self.behave(conn, self.closing)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.closing.set()
        self.sock.close()


def _ssh(conn, closing):
    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
    conn.settimeout(5)
    try:
        conn.recv(65536)
    except OSError:
        pass


def _hang_up(conn, closing):
    conn.settimeout(5)
    conn.recv(1)  # a byte of the request, then the connection closes without an answer


def _silent(conn, closing):
    closing.wait(120)  # accepts, never answers


def _dribble(conn, closing):
    """An answer one header byte at a time, each well within a socket timeout, for up to 90 s."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not closing.is_set():
        conn.sendall(b"a")
        time.sleep(0.2)


@pytest.fixture
def raw_server():
    made: list[RawServer] = []

    def make(behave) -> RawServer:
        made.append(RawServer(behave))
        return made[-1]

    yield make
    for s in made:
        s.close()


class FakeDNS:
    """The webhook module's name resolution, for names under ``.example.test``: ``answers[name]`` is the list of
    addresses the next lookups get (the last one repeats); every lookup is counted."""

    def __init__(self, real) -> None:
        self.real, self.answers, self.lookups = real, {}, []

    def __call__(self, host, port, *args, **kwargs):
        if not str(host).endswith(".example.test"):
            return self.real(host, port, *args, **kwargs)
        self.lookups.append(host)
        seq = self.answers[host]
        ip = seq.pop(0) if len(seq) > 1 else seq[0]
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        addr = (ip, port, 0, 0) if family == socket.AF_INET6 else (ip, port)
        return [(family, socket.SOCK_STREAM, 6, "", addr)]


@pytest.fixture
def dns(monkeypatch):
    fake = FakeDNS(webhooks.getaddrinfo)
    monkeypatch.setattr(webhooks, "getaddrinfo", fake)
    return fake


# ---------------------------------------------------------------- where a webhook may go
@pytest.mark.parametrize("host", INTERNAL)
def test_internal_addresses_are_refused_when_set(sqlite_url, host):
    study = open_study(sqlite_url, webhooks=True)
    eid, _ = study.create_experiment(_spec())
    with pytest.raises(BadRequest, match="not (a )?public"):
        study.set_on_done(eid, False, f"http://{host}:8080/hook")
    assert study.results(eid)["on_done"]["webhook_url"] is None


@pytest.mark.parametrize("host", [PUBLIC_IP, "[2606:2800:220:1::1]", "[2002:5db8:d70e::1]"])
def test_a_public_address_is_accepted(sqlite_url, host):
    """Only checked: nothing is called (there is no network here)."""
    study = open_study(sqlite_url, webhooks=True)
    eid, _ = study.create_experiment(_spec())
    url = f"https://{host}/hook"
    out = study.set_on_done(eid, False, url)
    assert out["webhook_url"] == url and re.fullmatch(r"[A-Za-z0-9_-]{43}", out["webhook_secret"])


def test_a_name_that_resolves_only_inside_is_refused_when_set(sqlite_url, dns):
    dns.answers["inside.example.test"] = ["10.1.2.3"]
    study = open_study(sqlite_url, webhooks=True)
    eid, _ = study.create_experiment(_spec())
    with pytest.raises(BadRequest, match="resolves only to addresses that are not public"):
        study.set_on_done(eid, False, "https://inside.example.test/hook")
    dns.answers["outside.example.test"] = [PUBLIC_IP]
    assert study.set_on_done(eid, False, "https://outside.example.test/hook")["webhook_secret"]


def test_internal_addresses_are_allowed_by_the_setting(sqlite_url):
    study = open_study(sqlite_url, webhooks=True, webhook_allow_internal=True)
    eid, _ = study.create_experiment(_spec())
    assert study.set_on_done(eid, False, "http://127.0.0.1:9/hook")["webhook_url"] == "http://127.0.0.1:9/hook"
    assert Settings.from_env({"PUREBANDITS_WEBHOOK_ALLOW_INTERNAL": "1"}).webhook_allow_internal is True
    assert Settings.from_env({}).webhook_allow_internal is False


def test_addresses_inside_ipv6_addresses_are_checked():
    for ip in ["::ffff:10.0.0.1", "::ffff:169.254.169.254", "2002:a00:1::1", "2002:7f00:1::", "64:ff9b::7f00:1",
               "::10.0.0.1", "fec0::1", "ff02::1", "2001:db8::1"]:
        assert not webhooks.is_public(ip), ip
    for ip in [PUBLIC_IP, "2606:2800:220:1::1", "2002:5db8:d70e::1", "8.8.8.8"]:
        assert webhooks.is_public(ip), ip


def test_a_name_that_turns_internal_is_refused_when_called(sqlite_url, dns, receiver):
    """Set while the name resolved to a public address, called after it resolves to the loopback, where a
    receiver listens: the call is refused, recorded in words, and nothing reaches the receiver."""
    handler, port = receiver
    dns.answers["turns.example.test"] = [PUBLIC_IP, "127.0.0.1"]
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, webhooks=True)
    eid, _ = study.create_experiment(_spec())
    study.set_on_done(eid, False, f"http://turns.example.test:{port}/hook")
    _finish(study, eid, clock)
    assert study.call_webhooks() == 1
    call = _call(study, eid)
    assert call["status"] is None and call["error"] == webhooks.REFUSED
    assert handler.calls == []
    clock.ms += DoneHooks.WEBHOOK_RECLAIM_MS + 1
    assert study.call_webhooks() == 0  # recorded once: never called again


def test_the_call_connects_to_the_address_it_checked(sqlite_url, dns, receiver, monkeypatch):
    """DNS rebinding: the name resolves to a public address for the check and to the loopback right after; the
    call connects to the checked public address (sent on to the local receiver here, there being no network)
    with one lookup, and names the host in ``Host``."""
    handler, port = receiver
    dns.answers["rebind.example.test"] = [PUBLIC_IP, PUBLIC_IP, "127.0.0.1"]
    dialled = []
    real = webhooks.create_connection

    def dial(address, *args, **kwargs):
        dialled.append(address)
        return real(("127.0.0.1", port), *args, **kwargs)

    monkeypatch.setattr(webhooks, "create_connection", dial)
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, webhooks=True)
    eid, _ = study.create_experiment(_spec())
    study.set_on_done(eid, False, f"http://rebind.example.test:{port}/hook?x=1")
    _finish(study, eid, clock)
    assert len(dns.lookups) == 1  # the check when the URL was set
    assert study.call_webhooks() == 1
    assert dialled == [(PUBLIC_IP, port)] and len(dns.lookups) == 2  # one lookup for the call
    assert _call(study, eid) == {"called_at": clock.ms / 1000, "status": 200, "error": None}
    (got,) = handler.calls
    assert got["headers"]["Host"] == f"rebind.example.test:{port}" and got["path"] == "/hook?x=1"


def test_an_allowed_internal_name_is_called_at_its_checked_address(sqlite_url, dns, receiver):
    """With internal addresses allowed, a name only the webhook module's resolver knows (the system's cannot
    resolve it) still reaches the receiver: the connection goes to the address resolved once."""
    handler, port = receiver
    dns.answers["local.example.test"] = ["127.0.0.1"]
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, **LOCAL)
    eid, _ = study.create_experiment(_spec())
    study.set_on_done(eid, False, f"http://local.example.test:{port}/hook")
    _finish(study, eid, clock)
    assert study.call_webhooks() == 1 and _call(study, eid)["status"] == 200
    assert handler.calls[0]["headers"]["Host"] == f"local.example.test:{port}"


def _certificates(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A test CA and a certificate it signed for hooks.example.test: (ca, certificate, key)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=webhook test CA")
    run("req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=hooks.example.test")
    (tmp_path / "ext.cnf").write_text("subjectAltName=DNS:hooks.example.test\n")
    run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "leaf.pem",
        "-days", "2", "-extfile", "ext.cnf")
    return tmp_path / "ca.pem", tmp_path / "leaf.pem", tmp_path / "leaf.key"


def test_https_checks_the_certificate_against_the_host_name(sqlite_url, dns, tmp_path, monkeypatch):
    """An https receiver on the loopback with a certificate for hooks.example.test (from a test CA the call is made
    to trust): the call to the checked address sends that name in SNI and checks the certificate against it;
    another name on the same address, or a CA not trusted, fails as a TLS failure without retries."""
    ca, cert, key = _certificates(tmp_path)
    handler = type("Receiver", (_Receiver,), {"calls": [], "status": 200, "location": None})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    sni: list[str | None] = []
    server_ctx.sni_callback = lambda sock, name, ctx: sni.append(name)
    srv.socket = server_ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    try:
        dns.answers["hooks.example.test"] = ["127.0.0.1"]
        dns.answers["other.example.test"] = ["127.0.0.1"]
        clock = Clock()
        study = open_study(sqlite_url, clock=clock, **LOCAL)
        trusting, system = ssl.create_default_context(cafile=str(ca)), webhooks._PinnedHTTPS.context
        eids = []
        for host, context in (("hooks.example.test", trusting), ("other.example.test", trusting),
                              ("hooks.example.test", system)):  # the system's CAs: the test CA is not among them
            eid, _ = study.create_experiment(_spec())
            study.set_on_done(eid, False, f"https://{host}:{port}/hook")
            _finish(study, eid, clock)
            monkeypatch.setattr(webhooks._PinnedHTTPS, "context", context)
            assert study.call_webhooks() == 1
            eids.append(eid)
    finally:
        srv.shutdown()
        srv.server_close()
    assert _call(study, eids[0])["status"] == 200 and len(handler.calls) == 1
    assert handler.calls[0]["headers"]["Host"] == f"hooks.example.test:{port}"
    for eid in eids[1:]:
        assert {k: v for k, v in _call(study, eid).items() if k != "called_at"} == {
            "status": None, "error": webhooks.TLS_FAILED}
    assert len(handler.calls) == 1
    assert sni == ["hooks.example.test", "other.example.test", "hooks.example.test"]  # one try each


# ---------------------------------------------------------------- failures: recorded once, in words
@pytest.mark.parametrize("behave", [_ssh, _hang_up], ids=["ssh-banner", "hang-up"])
def test_a_non_http_answer_is_recorded_once_and_the_sweep_goes_on(sqlite_url, raw_server, receiver, behave):
    """An SSH server (or one that hangs up) where the webhook points: recorded once as not an HTTP answer, not
    claimed again after the reclaim time, and the next experiment's webhook in the same sweep is called."""
    handler, port = receiver
    bad = raw_server(behave)
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, **LOCAL)
    first, _ = study.create_experiment(_spec())
    second, _ = study.create_experiment(_spec())
    study.set_on_done(first, False, f"http://127.0.0.1:{bad.port}/hook")
    study.set_on_done(second, False, f"http://127.0.0.1:{port}/hook")
    _finish(study, first, clock)
    _finish(study, second, clock)
    assert study.call_webhooks() == 2
    assert _call(study, first)["error"] == webhooks.NOT_HTTP and _call(study, first)["status"] is None
    assert _call(study, second)["status"] == 200 and len(handler.calls) == 1
    assert bad.connections == 1  # not retried
    clock.ms += DoneHooks.WEBHOOK_RECLAIM_MS + 1
    assert study.call_webhooks() == 0 and bad.connections == 1


def test_errors_are_coarse_words_not_socket_messages(sqlite_url):
    """A closed port: 'could not connect' (after the 3 tries), not 'Connection refused' (a port scanner)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, **LOCAL)
    eid, _ = study.create_experiment(_spec())
    study.set_on_done(eid, False, f"http://127.0.0.1:{port}/hook")
    _finish(study, eid, clock)
    assert study.call_webhooks() == 1
    assert _call(study, eid) == {"called_at": clock.ms / 1000, "status": None, "error": webhooks.COULD_NOT_CONNECT}


def test_no_redirect_is_followed(sqlite_url, receiver):
    handler, port = receiver
    handler.status, handler.location = 302, f"http://127.0.0.1:{port}/elsewhere"
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, **LOCAL)
    eid, _ = study.create_experiment(_spec())
    study.set_on_done(eid, False, f"http://127.0.0.1:{port}/hook")
    _finish(study, eid, clock)
    assert study.call_webhooks() == 1
    assert [c["path"] for c in handler.calls] == ["/hook"]
    call = _call(study, eid)
    assert call["status"] == 302 and call["error"] == "HTTP 302 Found (redirects are not followed)"


@pytest.mark.parametrize("behave", [_silent, _dribble], ids=["silent", "dribble"])
def test_a_call_takes_at_most_its_timeout(sqlite_url, raw_server, behave):
    """A receiver that never answers, or answers a byte at a time (each byte within a socket timeout): the call
    ends after about ``webhook_timeout_seconds`` (the bound allows all tries and their pauses, and then some),
    recorded as timed out, tried once (the receiver may have taken the call)."""
    timeout = 2.0
    slow = raw_server(behave)
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, webhook_timeout_seconds=timeout, **LOCAL)
    eid, _ = study.create_experiment(_spec())
    study.set_on_done(eid, False, f"http://127.0.0.1:{slow.port}/hook")
    _finish(study, eid, clock)
    start = time.monotonic()
    assert study.call_webhooks() == 1
    took = time.monotonic() - start
    assert took < webhooks.TRIES * timeout + 1 + 4 + 15, took
    assert _call(study, eid)["error"] == webhooks.TIMED_OUT and slow.connections == 1


# ---------------------------------------------------------------- signatures
def _doc_verify():
    """The verification function of the service guide, run as written there."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    (code,) = [b for b in blocks if "def verify_webhook" in b]
    scope: dict = {}
    exec(compile(code, str(DOC), "exec"), scope)  # noqa: S102 (our own documentation)
    return scope["verify_webhook"]


def test_calls_are_signed_as_the_guide_says(sqlite_url, receiver):
    handler, port = receiver
    verify = _doc_verify()
    clock = Clock()
    study = open_study(sqlite_url, clock=clock, **LOCAL)
    eid, _ = study.create_experiment(_spec())
    secret = study.set_on_done(eid, False, f"http://127.0.0.1:{port}/hook")["webhook_secret"]
    assert "webhook_secret" not in study.results(eid)["on_done"]
    _finish(study, eid, clock)
    assert study.call_webhooks() == 1
    (got,) = handler.calls
    headers, body = got["headers"], got["body"]
    assert verify(secret, headers, body)
    assert headers["X-Purebandits-Event-Id"] == f"experiment-{eid}-{clock.ms}"
    assert not verify(secret[:-1] + ("A" if secret[-1] != "A" else "B"), headers, body)  # another secret
    assert not verify(secret, headers, body.replace(b"webhook test", b"webhook tesT"))  # another body
    old = int(time.time()) - 600
    mac = hmac.new(secret.encode(), f"{old}.".encode() + body, hashlib.sha256).hexdigest()
    assert not verify(secret, {"X-Purebandits-Timestamp": str(old), "X-Purebandits-Signature": "v1=" + mac}, body)
    assert verify(secret, {"X-Purebandits-Timestamp": str(old), "X-Purebandits-Signature": "v1=" + mac}, body,
                  max_age=900)  # the same call is genuine, only too old
    assert webhooks.sign(secret, old, body) == "v1=" + mac


def test_the_secret_is_shown_once_over_http(sqlite_url):
    settings = Settings(database_url=sqlite_url, admin_token="adm", create_rate_per_second=0)
    with TestClient(create_app(settings)) as client:
        auth = {"Authorization": "Bearer adm"}
        eid = client.post("/api/experiments", json=_spec(), headers=auth).json()["id"]
        url = f"https://{PUBLIC_IP}/hook"
        r = client.post(f"/api/experiments/{eid}/on-done", headers=auth, json={"webhook_url": url})
        assert r.status_code == 200, r.text
        secret = r.json()["webhook_secret"]
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", secret)
        res = client.get(f"/api/experiments/{eid}/results", headers=auth)
        assert secret not in res.text and "webhook_secret" not in res.json()["on_done"]
        again = client.post(f"/api/experiments/{eid}/on-done", headers=auth, json={"webhook_url": url})
        assert again.json()["webhook_secret"] is None  # the same URL keeps its secret, unseen
        other = client.post(f"/api/experiments/{eid}/on-done", headers=auth, json={"webhook_url": url + "2"})
        assert other.json()["webhook_secret"] not in (None, secret)
        inside = client.post(f"/api/experiments/{eid}/on-done", headers=auth,
                             json={"webhook_url": "http://169.254.169.254/latest/meta-data/"})
        assert inside.status_code == 422 and "not a public address" in inside.json()["detail"]


# ---------------------------------------------------------------- who may set one
def test_webhooks_are_off_without_an_admin_token_by_default(sqlite_url):
    url = f"https://{PUBLIC_IP}/hook"
    clock = Clock()
    default = open_study(sqlite_url, clock=clock)
    eid, _ = default.create_experiment(_spec())
    with pytest.raises(Forbidden, match="PUREBANDITS_WEBHOOKS=1"):
        default.set_on_done(eid, False, url)
    default.set_on_done(eid, True, None)  # auto-stop alone is fine
    assert open_study(sqlite_url, admin_token="adm").set_on_done(eid, False, url)["webhook_url"] == url
    assert open_study(sqlite_url, webhooks=True).set_on_done(eid, False, url + "2")["webhook_url"] == url + "2"
    with pytest.raises(Forbidden, match="PUREBANDITS_WEBHOOKS=0"):
        open_study(sqlite_url, admin_token="adm", webhooks=False).set_on_done(eid, False, url)
    _finish(default, eid, clock)
    assert default.call_webhooks() == 0  # a URL set while they were on is not called while they are off
    assert Settings.from_env({}).webhooks is None and Settings.from_env({}).webhooks_on is False
    assert Settings.from_env({"PUREBANDITS_ADMIN_TOKEN": "x"}).webhooks_on is True
    assert Settings.from_env({"PUREBANDITS_WEBHOOKS": "1"}).webhooks_on is True
    assert Settings.from_env({"PUREBANDITS_WEBHOOKS": "auto"}).webhooks is None
    assert Settings.from_env({"PUREBANDITS_WEBHOOKS": "0", "PUREBANDITS_ADMIN_TOKEN": "x"}).webhooks_on is False


def test_off_by_default_over_http(sqlite_url):
    with TestClient(create_app(Settings(database_url=sqlite_url, create_rate_per_second=0))) as client:
        created = client.post("/api/experiments", json=_spec()).json()
        auth = {"Authorization": f"Bearer {created['owner_token']}"}
        r = client.post(f"/api/experiments/{created['id']}/on-done", headers=auth,
                        json={"webhook_url": f"https://{PUBLIC_IP}/hook"})
        assert r.status_code == 403
        assert "no admin token" in r.json()["detail"] and "PUREBANDITS_WEBHOOKS=1" in r.json()["detail"]
