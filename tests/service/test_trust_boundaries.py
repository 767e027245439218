"""Per-address limits (issue 41, item 5): which address a request counts against (forwarded headers from trusted
proxies only, IPv6 by /64), and the count-then-insert atomic across processes on PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from study_support import open_study

from conftest import HTTP
from purebandits.service.errors import RateLimited
from purebandits.service.experiment_meta import limit_key, origin_hash
from purebandits.testing.postgres import create_database, drop_database

BURST = 5
START_TIMEOUT = 300  # a loaded 2-core machine may take long to start a server (the default waits 60 s)


def test_ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4():
    assert limit_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == limit_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert limit_key("2001:db8:1:3::1") != limit_key("2001:db8:1:2::1")
    assert limit_key("::ffff:192.0.2.7") == limit_key("192.0.2.7") == "192.0.2.7"
    assert limit_key("fe80::1%eth0") == "fe80::/64"
    assert limit_key("unknown") == "unknown" and limit_key("192.0.2.8") != limit_key("192.0.2.7")
    assert origin_hash("2001:db8:1:2::1") == origin_hash("2001:db8:1:2:ffff::9")
    assert origin_hash("::ffff:192.0.2.7") == origin_hash("192.0.2.7")


def test_ids_from_one_ipv6_64_share_one_budget(sqlite_url):
    study = open_study(sqlite_url, participant_burst=BURST, participant_rate_per_second=0.01)
    for i in range(BURST):
        study.new_participant(origin=f"2001:db8:7:7::{i + 1:x}")
    with pytest.raises(RateLimited):
        study.new_participant(origin="2001:db8:7:7:1:2:3:4")
    study.new_participant(origin="2001:db8:7:8::1")  # another /64


def _register(url: str, forwarded: str) -> int:
    return HTTP.post(f"{url}/api/participants", headers={"X-Forwarded-For": forwarded}, timeout=60).status_code


def _limited_env() -> dict[str, str]:
    # uvicorn's own variable (here: trust anyone): the server must not use it
    return {"PUREBANDITS_PARTICIPANT_BURST": str(BURST), "PUREBANDITS_PARTICIPANT_RATE_PER_SECOND": "0.01",
            "FORWARDED_ALLOW_IPS": "*"}


def test_serve_believes_no_forwarded_header_by_default(server_cls, sqlite_url, tmp_path):
    """Without ``--forwarded-allow-ips`` an X-Forwarded-For from loopback is ignored: ids registered with a new
    forwarded address each time still count against the connecting address, and the id past the burst gets 429."""
    srv = server_cls(sqlite_url, env=_limited_env(), log_dir=tmp_path).start(timeout=START_TIMEOUT)
    try:
        codes = [_register(srv.url, f"192.0.2.{i + 1}") for i in range(BURST + 1)]
    finally:
        srv.stop()
    assert codes == [201] * BURST + [429]


def test_serve_uses_the_forwarded_address_from_a_trusted_proxy(server_cls, sqlite_url, tmp_path):
    """With ``--forwarded-allow-ips 127.0.0.1`` the forwarded address is the client's: each forwarded address
    has its own budget, and an IPv6 /64 one budget."""
    srv = server_cls(sqlite_url, "--forwarded-allow-ips", "127.0.0.1", env=_limited_env(),
                     log_dir=tmp_path).start(timeout=START_TIMEOUT)
    try:
        spread = [_register(srv.url, f"192.0.2.{i + 1}") for i in range(BURST + 1)]
        one = [_register(srv.url, "198.51.100.5") for _ in range(BURST + 1)]
        v6 = [_register(srv.url, f"2001:db8:5:5::{i + 1:x}") for i in range(BURST + 1)]
    finally:
        srv.stop()
    assert spread == [201] * (BURST + 1)
    assert one == [201] * BURST + [429]
    assert v6 == [201] * BURST + [429]


@pytest.fixture
def pg_url(pg_admin_url):
    url = create_database(pg_admin_url)
    yield url
    drop_database(pg_admin_url, url)


def _race(calls: list) -> tuple[int, int]:
    """Run every call at once from its own thread; (admitted, refused with RateLimited)."""
    barrier = threading.Barrier(len(calls))
    ok, limited, errors = [], [], []

    def run(call):
        barrier.wait()
        try:
            call()
            ok.append(1)
        except RateLimited:
            limited.append(1)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:3]
    return len(ok), len(limited)


@pytest.mark.postgres
def test_the_id_limit_holds_across_processes_on_postgresql(pg_url):
    """Two Study instances (two worker processes' worth of engines) on one PostgreSQL database register new ids
    from one address at the same time: exactly ``participant_burst`` are admitted (READ COMMITTED let two
    transactions both count burst - 1 and insert)."""
    burst = 8
    kw = {"participant_burst": burst, "participant_rate_per_second": 0.01, "db_threads": 16}
    studies = [open_study(pg_url, **kw) for _ in range(2)]
    calls = [lambda s=s: s.new_participant(origin="203.0.113.9") for s in studies for _ in range(16)]
    assert _race(calls) == (burst, len(calls) - burst)
    for s in studies:
        s.close()
        s.engine.dispose()


@pytest.mark.postgres
def test_the_anonymous_create_limit_holds_across_processes_on_postgresql(pg_url):
    burst = 5
    kw = {"create_burst": burst, "create_rate_per_second": 0.001, "warm_all_learners": False}
    studies = [open_study(pg_url, **kw) for _ in range(2)]
    spec = {"items": ["a", "b", "c"]}
    calls = [lambda s=s, i=i: s.create_experiment({**spec, "name": f"e{i}"}, "203.0.113.10")
             for i, s in enumerate(studies * 8)]
    assert _race(calls) == (burst, len(calls) - burst)
    for s in studies:
        s.close()
        s.engine.dispose()
