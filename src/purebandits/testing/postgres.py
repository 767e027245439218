"""A throwaway PostgreSQL server for tests (``initdb`` + ``pg_ctl`` on a free loopback port).

Used by the service tests so that they run against a real PostgreSQL server. If
``PUREBANDITS_TEST_PG_URL`` is set, that server is used instead. When running as root the
cluster is created and run as the ``postgres`` system user (``runuser -u postgres --``),
because PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

__all__ = ["PostgresUnavailable", "find_pg_bin", "temporary_postgres", "create_database", "drop_database"]


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries or no way to start a server here (the message says why)."""


def find_pg_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` (or ``initdb`` on PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise PostgresUnavailable("PostgreSQL server binaries not found (apt-get install postgresql)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def temporary_postgres(durable: bool = False, password: str | None = None) -> Iterator[str]:
    """Start a private PostgreSQL cluster; yield its admin URL (``postgresql://postgres@127.0.0.1:PORT/postgres``).

    By default the cluster trades durability for speed (``fsync``, ``synchronous_commit`` and
    ``full_page_writes`` off), which tests want; ``durable=True`` keeps PostgreSQL's durable
    defaults, as a production server has them (what benchmarks must measure). With ``password``, TCP
    connections must authenticate (SCRAM-SHA-256) and the yielded URL carries the password, as a
    production server's does; without, the cluster trusts every local connection.
    """
    pg_bin = find_pg_bin()
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    prefix: list[str] = []
    if as_root:
        if shutil.which("runuser") is None:
            raise PostgresUnavailable("running as root and runuser is missing: cannot run PostgreSQL as a user")
        prefix = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="purebandits-pg-"))
    data, sock, logfile = base / "data", base / "sock", base / "server.log"
    sock.mkdir()
    if as_root:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        os.chmod(base, 0o700)
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}

    def run(*cmd: str) -> None:
        proc = subprocess.run([*prefix, *cmd], env=env, capture_output=True, text=True, cwd=str(base))
        if proc.returncode != 0:
            log = logfile.read_text() if logfile.exists() else ""
            raise PostgresUnavailable(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr.strip()} {log[-2000:]}")

    try:
        auth = ["--auth=trust"]
        if password is not None:
            pwfile = base / "pwfile"
            pwfile.write_text(password + "\n")
            if as_root:
                shutil.chown(pwfile, "postgres")
            auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        run(str(pg_bin / "initdb"), "-D", str(data), "-U", "postgres", *auth, "-E", "UTF8",
            "--no-sync", "--locale=C.UTF-8")
        opts = (f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={sock} -c max_connections=200"
                + ("" if durable else " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"))
        run(str(pg_bin / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(logfile), "-w", "-t", "60", "start")
        user = "postgres" if password is None else f"postgres:{quote(password, safe='')}"
        yield f"postgresql://{user}@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, str(pg_bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           env=env, capture_output=True, cwd=str(base))
        shutil.rmtree(base, ignore_errors=True)


def _admin_connect(admin_url: str):  # type: ignore[no-untyped-def]
    import psycopg

    for attempt in range(50):
        try:
            return psycopg.connect(admin_url, autocommit=True)
        except psycopg.OperationalError:
            if attempt == 49:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def create_database(admin_url: str, name: str | None = None) -> str:
    """Create a fresh database on the server at ``admin_url``; return its URL."""
    name = name or "t_" + uuid.uuid4().hex[:16]
    with _admin_connect(admin_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin_url.rpartition("/")
    return f"{base}/{name}"


def drop_database(admin_url: str, url: str) -> None:
    """Drop the database of ``url`` on the server at ``admin_url``, closing its open connections (FORCE)."""
    name = url.rpartition("/")[2]
    with _admin_connect(admin_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
