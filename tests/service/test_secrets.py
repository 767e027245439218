"""Secrets off the command line: the database URL and the admin token from the environment or from a file only its
owner may read, PostgreSQL's password from its password file, and a warning when a password is given with ``--db``.

The service guide used to show ``purebandits serve --db postgresql://user:password@host/db``, which puts the
password in every process listing of the machine (``ps``, ``/proc/PID/cmdline``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import HTTP, SRC, Server
from purebandits.service.settings import Settings
from purebandits.testing.postgres import PostgresUnavailable, create_database, temporary_postgres


def _secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_secret_files_are_read_and_checked(tmp_path):
    url = _secret(tmp_path / "db", "postgresql://app:s3cret@db.internal/contest")
    token = _secret(tmp_path / "admin", "adm-123")
    s = Settings.from_env({"PUREBANDITS_DATABASE_URL_FILE": str(url), "PUREBANDITS_ADMIN_TOKEN_FILE": str(token)})
    assert (s.database_url, s.admin_token) == ("postgresql://app:s3cret@db.internal/contest", "adm-123")

    loose = _secret(tmp_path / "loose", "adm-456", 0o644)
    with pytest.raises(ValueError, match=r"PUREBANDITS_ADMIN_TOKEN_FILE: .* may be read by other users \(mode 644\); "
                                         r"chmod 600"):
        Settings.from_env({"PUREBANDITS_ADMIN_TOKEN_FILE": str(loose)})
    with pytest.raises(ValueError, match="is empty"):
        Settings.from_env({"PUREBANDITS_ADMIN_TOKEN_FILE": str(_secret(tmp_path / "empty", ""))})
    with pytest.raises(ValueError, match="cannot read"):
        Settings.from_env({"PUREBANDITS_ADMIN_TOKEN_FILE": str(tmp_path / "missing")})
    with pytest.raises(ValueError, match="both PUREBANDITS_ADMIN_TOKEN and PUREBANDITS_ADMIN_TOKEN_FILE"):
        Settings.from_env({"PUREBANDITS_ADMIN_TOKEN": "x", "PUREBANDITS_ADMIN_TOKEN_FILE": str(token)})
    # only the secrets have a file form: a _FILE variable of another setting means nothing
    assert Settings.from_env({"PUREBANDITS_PUBLIC_URL_FILE": str(token)}).public_url is None


def _cmdlines(pid: int) -> list[str]:
    """The command lines of ``pid`` and its descendants, as ``ps`` shows them to any user."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines() if line.strip()]
    family, lines, grew = {pid}, [], True
    while grew:
        grew = False
        for p, pp, *_ in rows:
            if int(pp) in family and int(p) not in family:
                family.add(int(p))
                grew = True
    for p, _pp, *args in rows:
        if int(p) in family:
            lines.append(args[0] if args else "")
    return lines


@pytest.fixture(scope="module")
def admin_file_server(tmp_path_factory):
    """``serve --workers 2`` with the admin token from ``PUREBANDITS_ADMIN_TOKEN_FILE``, and that token: what the
    test of that setting checks, and the admin server the command-line client's token-file test talks to (a server
    start costs about 3 s of a core, this one more)."""
    tmp = tmp_path_factory.mktemp("admin-token-file")
    token = "admin-" + os.urandom(8).hex()
    env = {"PUREBANDITS_ADMIN_TOKEN_FILE": str(_secret(tmp / "admin-token", token))}
    srv = Server(f"sqlite:///{tmp / 's.sqlite'}", "--workers", "2", env=env)
    with srv.start(timeout=300):  # the first start after a change to the kernels compiles them first
        yield srv, token


@pytest.mark.slow  # a live server with two workers
def test_serve_takes_the_admin_token_from_a_file(admin_file_server):
    """``PUREBANDITS_ADMIN_TOKEN_FILE``: creating needs that token, and it is on no command line of the server."""
    srv, token = admin_file_server
    spec = {"name": "e", "items": [{"id": "a", "text": "a"}, {"id": "b", "text": "b"}]}
    assert HTTP.post(srv.url + "/api/experiments", json=spec, timeout=60).status_code == 401
    r = HTTP.post(srv.url + "/api/experiments", json=spec, timeout=60,
                   headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201, r.text
    lines = _cmdlines(srv.proc.pid)
    assert len(lines) >= 3  # the supervisor and its two workers
    assert not [line for line in lines if token in line]


def test_serve_refuses_a_secret_file_others_may_read(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC,
           "PUREBANDITS_ADMIN_TOKEN_FILE": str(_secret(tmp_path / "t", "tok", 0o640))}
    r = subprocess.run([sys.executable, "-m", "purebandits.cli", "serve", "--db", f"sqlite:///{tmp_path / 's'}",
                        "--upgrade-only"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "may be read by other users (mode 640); chmod 600" in r.stderr


@pytest.fixture(scope="module")
def pg_with_password():
    """A PostgreSQL cluster whose TCP connections must give a password (the admin URL carries it)."""
    try:
        with temporary_postgres(password="pw-" + os.urandom(6).hex()) as admin:
            yield admin
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")


@pytest.mark.postgres
def test_postgres_password_from_pgpass_or_url_file(pg_with_password, tmp_path):
    """The password from PostgreSQL's password file (``PGPASSFILE``) with a URL that has none, or the whole URL from
    ``PUREBANDITS_DATABASE_URL_FILE``; never on the command line. Without either the server cannot connect (the
    cluster really wants the password), and ``--db`` with a password in it is served with a warning."""
    with_password = create_database(pg_with_password)
    parts = httpx.URL(with_password)
    password = parts.password
    bare = with_password.replace(f":{password}@", "@")
    assert password and password not in bare

    cmd = [sys.executable, "-m", "purebandits.cli", "serve", "--db", bare, "--upgrade-only"]
    env = {**os.environ, "PYTHONPATH": SRC, "PGPASSFILE": str(tmp_path / "nothing")}
    denied = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert denied.returncode != 0 and "password" in denied.stderr.lower()

    pgpass = _secret(tmp_path / "pgpass", f"{parts.host}:{parts.port}:*:postgres:{password}")
    with Server(bare, env={"PGPASSFILE": str(pgpass)}).start(timeout=300) as srv:
        assert HTTP.get(srv.url + "/healthz", timeout=30).status_code == 200
        assert not [line for line in _cmdlines(srv.proc.pid) if password in line]

    url_file = _secret(tmp_path / "db-url", with_password)
    env = {**os.environ, "PYTHONPATH": SRC, "PUREBANDITS_DATABASE_URL_FILE": str(url_file),
           "PGPASSFILE": str(tmp_path / "nothing")}
    ok = subprocess.run([sys.executable, "-m", "purebandits.cli", "serve", "--upgrade-only"], env=env,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "warning" not in ok.stderr

    env = {**os.environ, "PYTHONPATH": SRC, "PGPASSFILE": str(tmp_path / "nothing")}
    warned = subprocess.run([sys.executable, "-m", "purebandits.cli", "serve", "--db", with_password,
                             "--upgrade-only"], env=env, capture_output=True, text=True, timeout=120)
    assert warned.returncode == 0, warned.stderr
    assert "warning: the database password given with --db is visible" in warned.stderr


@pytest.mark.slow  # a live server and fresh interpreters
def test_cli_client_token_from_a_file(admin_file_server, tmp_path):
    """``purebandits experiment``: ``PUREBANDITS_TOKEN_FILE`` (mode 0600) as the token; a looser one is refused."""
    srv, token = admin_file_server
    base = {**os.environ, "PYTHONPATH": SRC, "PUREBANDITS_SERVER": srv.url}
    base.pop("PUREBANDITS_TOKEN", None)
    cmd = [sys.executable, "-m", "purebandits.cli", "experiment", "list"]
    r = subprocess.run(cmd, env={**base, "PUREBANDITS_TOKEN_FILE": str(_secret(tmp_path / "t", token))},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cmd, env={**base, "PUREBANDITS_TOKEN_FILE": str(_secret(tmp_path / "u", token, 0o644))},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "chmod 600" in r.stderr
    r = subprocess.run(cmd, env=base, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "PUREBANDITS_TOKEN_FILE" in r.stderr
