"""Serve the app as one Streamlit replica per core behind nginx, in one container: what ``deploy/start.sh`` runs.

    python -m app.replicas [--port 8501] [--replicas N]

Python runs one thread at a time, so one server process is one core's work in a row: a class of 30 on two cores meets
its goal with two replicas behind a proxy where one process cannot (bench/results/classroom-two-replicas.txt).
This starts ``BFE_REPLICAS`` replicas (``auto``: one per core, at most 4) of ``python -m app.serve`` on
127.0.0.1, all with the same ``DATABASE_URL`` and ``BFE_MODEL_DIR`` (SQLite's WAL serves several processes of one
machine; the results database, the classes and the lab's queue are shared through it), and Debian's nginx on the
public port with sticky sessions (``deploy/nginx-replicas.conf``: a route cookie hashed onto the replicas). A
replica that exits is started again (after 1 s, then up to 30 s between tries while it keeps failing); nginx
sends its browsers to the others meanwhile. SIGTERM or SIGINT stops everything. With one replica, or without
nginx, it runs ``app.serve`` on the public port directly, as before.

Hand-written because the container has no init system to lean on and the job is small: a supervisor such as
supervisord or circus would add a dependency and a configuration language for five processes and one restart rule.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "deploy" / "nginx-replicas.conf"
#: Replica ports: the first is this, then one up each (on 127.0.0.1 only).
FIRST_PORT = 8601


def render_config(prefix: Path, listen: str, upstream_ports: list[int]) -> str:
    """deploy/nginx-replicas.conf with its placeholders filled (``listen``: ``host:port``)."""
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=0;" for p in upstream_ports)
    return string.Template(TEMPLATE.read_text()).safe_substitute(PREFIX=str(prefix), LISTEN=listen, SERVERS=servers)


def nginx_binary() -> str | None:
    """Debian's nginx, if installed."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def replica_ports(n: int, first: int = FIRST_PORT) -> list[int]:
    """``n`` free local ports from ``first`` up."""
    ports, port = [], first
    while len(ports) < n:
        if port > first + 1000:
            raise RuntimeError(f"No {n} free ports from {first}.")
        if _free(port):
            ports.append(port)
        port += 1
    return ports


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


class Replicas:
    """The replicas and their proxy: started, watched, restarted, stopped."""

    def __init__(self, n: int, port: int, address: str = "0.0.0.0", extra: list[str] | None = None) -> None:
        self.n, self.port, self.address, self.extra = n, port, address, list(extra or [])
        self.ports = replica_ports(n)
        self.procs: list[subprocess.Popen | None] = [None] * n
        self.failures = [0] * n
        self.next_try = [0.0] * n
        self.proxy: subprocess.Popen | None = None
        self.prefix = Path(tempfile.mkdtemp(prefix="bfe-nginx-"))
        self.stopping = False

    def _start(self, i: int) -> None:
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "app.serve", "--server.port", str(self.ports[i]), "--server.address", "127.0.0.1",
             "--server.headless", "true", *self.extra], cwd=ROOT, env={**os.environ, "BFE_REPLICA": str(i)})
        print(f"replica {i} started on 127.0.0.1:{self.ports[i]} (pid {self.procs[i].pid})", flush=True)

    def start(self, nginx: str) -> None:
        for i in range(self.n):
            self._start(i)
        os.chmod(self.prefix, 0o755)
        (self.prefix / "nginx.conf").write_text(render_config(self.prefix, f"{self.address}:{self.port}", self.ports))
        # nginx listens at once: a browser that comes before a replica is up waits in the proxy, not refused
        self.proxy = subprocess.Popen([nginx, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), "-g", "daemon off;"])
        print(f"nginx on {self.address}:{self.port} -> {len(self.ports)} replicas", flush=True)

    def watch_once(self) -> None:
        """Start again a replica that exited (with a back-off while it keeps failing); nginx too."""
        now = time.monotonic()
        for i, proc in enumerate(self.procs):
            if proc is None or proc.poll() is None:
                if proc is not None and self.failures[i] and _healthy(f"http://127.0.0.1:{self.ports[i]}/_stcore/health"):
                    self.failures[i] = 0
                continue
            if self.next_try[i] == 0.0:
                self.failures[i] += 1
                self.next_try[i] = now + min(30.0, 2.0 ** (self.failures[i] - 1))
                print(f"replica {i} exited with {proc.returncode}; starting it again", flush=True)
            elif now >= self.next_try[i]:
                self.next_try[i] = 0.0
                self._start(i)
        if self.proxy is not None and self.proxy.poll() is not None and not self.stopping:
            raise SystemExit(f"nginx exited with {self.proxy.returncode}")

    def stop(self) -> None:
        self.stopping = True
        everyone = [p for p in (self.proxy, *self.procs) if p is not None and p.poll() is None]
        for p in everyone:
            p.terminate()
        deadline = time.monotonic() + 15
        for p in everyone:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.prefix, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app.replicas", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8501")))
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument("--replicas", type=int, default=None, help="default: BFE_REPLICAS")
    args, extra = parser.parse_known_args(argv)
    sys.path.insert(0, str(ROOT))
    from core.errors import ExplorerError
    from core.settings import get_settings

    try:
        n = args.replicas if args.replicas is not None else get_settings().replicas
    except ExplorerError as err:
        print(f"{err.message} {err.hint or ''}", file=sys.stderr)
        n = 1
    nginx = nginx_binary()
    if n <= 1 or nginx is None:
        if n > 1:
            print("nginx is not installed: one replica (apt-get install -y nginx-light for one per core)", file=sys.stderr)
        os.execv(sys.executable, [sys.executable, "-m", "app.serve", "--server.port", str(args.port), "--server.address",
                                  args.address, *extra])
    team = Replicas(n, args.port, args.address, extra)

    def stop(signum: int, _frame: object) -> None:
        team.stop()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    team.start(nginx)
    try:
        while True:
            time.sleep(0.5)
            team.watch_once()
    finally:
        team.stop()


if __name__ == "__main__":
    main()
