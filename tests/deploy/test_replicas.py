"""One container serves a class on every core: ``python -m app.replicas`` (what deploy/start.sh runs) starts a
replica per core behind nginx with sticky sessions and one database, starts a killed replica again, and stops
everything on SIGTERM; with one replica it is the plain server."""

from __future__ import annotations

import contextlib
import http.cookiejar
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from app.replicas import render_config, replica_ports
from bench.scaleout import free_port, wait_healthy
from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # servers


def _children(proc: subprocess.Popen) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children(recursive=False)


def _replicas(proc: subprocess.Popen) -> list[psutil.Process]:
    out = []
    for c in _children(proc):
        with contextlib.suppress(psutil.ZombieProcess, psutil.NoSuchProcess):  # one just killed, not yet reaped
            if "app.serve" in " ".join(c.cmdline()):
                out.append(c)
    return out


def _answers(opener, url: str) -> bool:
    try:
        return opener.open(url, timeout=5).status == 200
    except OSError:
        return False


def _wait(predicate, timeout: float = 90, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out: {what}")


def test_the_nginx_config_names_every_replica_and_the_public_port(tmp_path: Path) -> None:
    conf = render_config(tmp_path, "0.0.0.0:8501", [8601, 8602, 8603])
    assert "listen 0.0.0.0:8501;" in conf and conf.count("server 127.0.0.1:86") == 3
    assert not any(f"${{{name}}}" in conf for name in ("PREFIX", "LISTEN", "SERVERS"))
    assert "hash $bfe_route consistent" in conf  # sticky sessions
    ports = replica_ports(3, first=free_port())
    assert len(set(ports)) == 3


def test_replicas_behind_nginx_share_a_database_restart_a_killed_replica_and_stop_together(tiny_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1", "BFE_WARMUP": "0", "BFE_REPLICAS": "2",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'results.db'}"}
    log = open(tmp_path / "replicas.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "app.replicas", "--port", str(port), "--address", "127.0.0.1"], cwd=ROOT,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", timeout=120)
        first = _replicas(proc)
        assert len(first) == 2 and any("nginx" in c.name() for c in _children(proc))
        # a browser keeps its replica: the route cookie comes back and the same replica answers
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=5).read()
        assert any(c.name == "bfe_route" for c in jar)
        # kill -9 one replica: the proxy answers meanwhile, and the replica is started again
        victim = first[0]
        victim.kill()
        for _ in range(5):  # each answered (a request that meets the replica starting again may be tried twice)
            _wait(lambda: _answers(opener, f"http://127.0.0.1:{port}/_stcore/health"), 10, "the proxy answers")
        _wait(lambda: len(_replicas(proc)) == 2 and victim.pid not in [c.pid for c in _replicas(proc)], what="restart")
        now = _replicas(proc)
        everyone = [*now, *_children_safe(now), *[c for c in _children(proc) if "nginx" in c.name()]]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        _wait(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in everyone), 20, "all stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    text = (tmp_path / "replicas.log").read_text(errors="replace")
    assert "replica 0 exited" in text or "replica 1 exited" in text, text[-2000:]


def _children_safe(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            out.extend(p.children(recursive=True))
    return out


def test_one_replica_is_the_plain_server(tiny_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1", "BFE_WARMUP": "0", "BFE_REPLICAS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "app.replicas", "--port", str(port), "--address", "127.0.0.1"], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", timeout=120)
        assert "app.serve" in " ".join(psutil.Process(proc.pid).cmdline())  # exec'd: no supervisor, no proxy
    finally:
        proc.terminate()
        proc.wait(timeout=20)
