"""A throwaway PostgreSQL server on localhost for the database tests.

``BFE_TEST_POSTGRES_URL`` (any SQLAlchemy URL) uses an existing server instead. Otherwise the
server binaries from Debian's ``postgresql`` package (``apt-get install -y postgresql``, which the
README's test command and ``.ci/run`` do) start a fresh cluster in a temporary folder, as the
``postgres`` user when the tests run as root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class PostgresMissing(RuntimeError):
    pass


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path:
        return path
    raise PostgresMissing(f"PostgreSQL's {name} is not installed: run `apt-get install -y postgresql` "
                          "(the README's test command does), or set BFE_TEST_POSTGRES_URL to a server.")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A running test cluster that a fault test can stop and start again (same data, same port)."""

    def __init__(self, url: str, run: Callable[..., Any], pg_ctl: str, data: Path, log: Path, options: str) -> None:
        self.url, self._run, self._pg_ctl, self._data, self._log, self._options = url, run, pg_ctl, data, log, options

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: connections are closed; ``immediate``: as if it crashed)."""
        self._run(self._pg_ctl, "-D", str(self._data), "-m", mode, "-w", "stop")

    def start(self) -> None:
        self._run(self._pg_ctl, "-D", str(self._data), "-l", str(self._log), "-w", "-t", "60", "-o", self._options, "start")


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the SQLAlchemy URL of an empty database on a PostgreSQL server that lives for the block."""
    if os.environ.get("BFE_TEST_POSTGRES_URL"):
        yield os.environ["BFE_TEST_POSTGRES_URL"]
        return
    with postgres_cluster() as cluster:
        yield cluster.url


@contextmanager
def postgres_cluster() -> Iterator[Cluster]:
    """A fresh PostgreSQL cluster of our own (never ``BFE_TEST_POSTGRES_URL``: a fault test stops it), for the block."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    root = Path(tempfile.mkdtemp(prefix="bfe-pg-"))
    data, port = root / "data", _free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresMissing("Running as root needs the 'postgres' user that Debian's postgresql package creates.") from None
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    run = lambda *cmd: subprocess.run([*prefix, *cmd], check=True, capture_output=True, text=True, timeout=120)  # noqa: E731
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    try:
        run(initdb, "-D", str(data), "-U", "bfe", "--auth=trust", "--no-sync", "-E", "UTF8")
        run(pg_ctl, "-D", str(data), "-l", str(root / "server.log"), "-w", "-t", "60", "-o", options, "start")
    except subprocess.CalledProcessError as err:
        log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {err.stderr}\n{log}") from None
    try:
        yield Cluster(f"postgresql+psycopg://bfe@127.0.0.1:{port}/postgres", run, pg_ctl, data, root / "server.log", options)
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def fresh_pg(pg_url: str) -> str:
    """``pg_url`` emptied of the results tables (the server lives for the run; tests start from nothing)."""
    from analysis import results_db as db

    db.dispose_engines()
    db.drop_tables(db.get_engine(pg_url))
    db.dispose_engines()
    return pg_url
