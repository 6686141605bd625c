"""Start the app as N replicas behind Debian's nginx (deploy/nginx-replicas.conf), on 127.0.0.1.

Used by ``bench/classroom.py --replicas N`` and ``tests/deploy/test_scaleout.py``. Each replica is
``python -m app.serve`` on its own port with the same ``DATABASE_URL`` and ``BFE_MODEL_DIR``;
nginx listens on one more port and keeps each browser on one replica (a route cookie).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "deploy" / "nginx-replicas.conf"


class NginxMissing(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_binary() -> str:
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not exe:
        raise NginxMissing("nginx is not installed: `apt-get install -y nginx-light` (the README's test command does).")
    return exe


def render_config(prefix: Path, listen: int, upstream_ports: list[int]) -> str:
    """deploy/nginx-replicas.conf with its placeholders filled (the container's own rendering, on 127.0.0.1)."""
    from app.replicas import render_config as render

    return render(prefix, f"127.0.0.1:{listen}", upstream_ports)


def wait_healthy(url: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer in {timeout:.0f} s")


@dataclass
class Cluster:
    url: str  # the proxy
    replicas: list[subprocess.Popen]
    ports: list[int]

    def sessions_per_replica(self) -> list[int]:
        """Open websocket connections each replica holds now (established TCP connections on its port)."""
        counts = []
        for proc, port in zip(self.replicas, self.ports, strict=True):
            conns = psutil.Process(proc.pid).net_connections(kind="tcp")
            counts.append(sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port))
        return counts


def wait_warm(log: Path, timeout: float = 180) -> None:
    """Until the server's log says its background warm-up is done (the bundled model loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b"warm-up ready" in log.read_bytes():
            return
        time.sleep(0.2)
    raise RuntimeError("the warm-up did not finish: " + log.read_text(errors="replace")[-2000:])


@contextmanager
def warm_server(env: dict[str, str], log: Path, stop_s: float = 15) -> Iterator[tuple[str, subprocess.Popen]]:
    """One ``python -m app.serve`` on a free local port with ``env``, healthy and warmed up: (its URL, the process);
    stopped after."""
    port = free_port()
    proc = start_replica(port, env, log)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health")
        wait_warm(log)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=stop_s)


def start_replica(port: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "app.serve", "--server.port", str(port), "--server.address", "127.0.0.1",
                                 "--server.headless", "true"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


@contextmanager
def cluster(n: int, env: dict[str, str]) -> Iterator[Cluster]:
    """``n`` replicas sharing ``env`` (give it DATABASE_URL and BFE_MODEL_DIR) behind nginx; all stopped after."""
    nginx = nginx_binary()
    prefix = Path(tempfile.mkdtemp(prefix="bfe-nginx-"))
    os.chmod(prefix, 0o755)
    ports = [free_port() for _ in range(n)]
    procs = [start_replica(p, env, prefix / f"replica-{i}.log") for i, p in enumerate(ports)]
    proxy = None
    try:
        for p in ports:
            wait_healthy(f"http://127.0.0.1:{p}/_stcore/health")
        listen = free_port()
        (prefix / "nginx.conf").write_text(render_config(prefix, listen, ports))
        proxy = subprocess.Popen([nginx, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_healthy(f"http://127.0.0.1:{listen}/_stcore/health", timeout=30)
        yield Cluster(f"http://127.0.0.1:{listen}", procs, ports)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=10)
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(prefix, ignore_errors=True)
