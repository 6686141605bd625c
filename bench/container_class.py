"""A class against the container as built and started as a Space starts it (its entrypoint, as its user, one replica
per core behind its nginx by default): bench/classroom.py's students, N = 1 then N = 30, each repeated.

    python bench/container_class.py [--repeats 3] [--replicas auto]

Builds the Dockerfile here the way the container test does (``tests/helpers/container.py``: mmdebstrap, podman,
chroot; root needed), starts it with its persistent storage on a temporary folder, waits for the warm-up, then runs
the classroom actions (open the Attention page with their own sentence, change the layer and the head, open the
calculator and change the GPU, open the results and filter) and prints bench/classroom.py's report: per action the
p95 against the floor N * t1 / cores (goal: worst p95 <= 2x its floor at N = 30), errors, completed sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.classroom import RssMonitor, one_class, report  # noqa: E402
from bench.scaleout import free_port  # noqa: E402


def server_pids() -> list[int]:
    """The container's Streamlit replicas (their model processes are their children; the supervisor and nginx idle)."""
    serving = [p for p in psutil.process_iter(["cmdline"]) if "-m app.serve" in " ".join(p.info["cmdline"] or [])]
    pids = {p.pid for p in serving}
    return [p.pid for p in serving if p.ppid() not in pids]  # a model process (forked: the same command line) is a child


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 30])
    parser.add_argument("--replicas", default="auto", help="BFE_REPLICAS in the container (auto: one per core)")
    args = parser.parse_args()
    from core import registry
    from tests.helpers import container

    t0 = time.perf_counter()
    built = container.build()
    print(f"image {built.image}: built in {built.seconds:.0f} s ({time.perf_counter() - t0:.0f} s with the base), "
          f"{built.size_bytes / 1e9:.2f} GB", flush=True)
    data = Path(tempfile.mkdtemp(prefix="bfe-space-data-"))
    data.chmod(0o777)
    results: dict[int, list[dict]] = {n: [] for n in sorted(set(args.sizes))}
    try:
        with container.rootfs(built.image, data) as root:
            port = free_port()
            t1 = time.perf_counter()
            with container.start(built.image, root, port, env={"HF_HUB_OFFLINE": "1", "BFE_REPLICAS": args.replicas}) as url:
                print(f"healthy {time.perf_counter() - t1:.1f} s after the start", flush=True)
                time.sleep(30)  # the replicas' warm-up (each imports torch and loads the bundled model in its model process)
                pids = server_pids()
                idle = RssMonitor(pids).now()
                print(f"replicas: {len(pids)}, {idle:.0f} MB at rest with their model processes", flush=True)
                for rep in range(args.repeats):
                    for n in results:
                        results[n].append(asyncio.run(one_class(url, n, pids, first=1000 * rep + n)))
                        print(f"N = {n}: done (repeat {rep + 1})", flush=True)
    finally:
        import subprocess

        subprocess.run(["podman", "rmi", "-f", built.image, container.BASE_IMAGE], capture_output=True)
    model_mb = registry.find(registry.bundled_id()).parameters * 4 / 2**20 * len(pids)
    report(results, os.cpu_count() or 1, idle, model_mb)


if __name__ == "__main__":
    main()
