"""Build the project's Dockerfile and start the image here, without Docker: what the container test uses.

Docker Hub and the Docker daemon are not available on this machine or in CI, so the image is built
the one way that works here: Debian's ``mmdebstrap`` makes a minimal bookworm base (kept outside the checkout for a
week, :func:`base_tree`, so a developer's second run skips it)
with Python 3.11 (the Dockerfile's ``BASE`` argument accepts any Debian image with Python 3.11),
``podman import`` turns it into an image, and ``podman build --isolation=chroot`` builds our
Dockerfile with pip reaching PyPI. The CPU torch wheel comes from pip's local find-links folder
(``WHEELS``), and the host's CA bundle is mounted because HTTPS goes through a TLS-inspecting proxy.

``podman run`` needs cgroups this sandbox lacks, so :func:`start` runs the built filesystem the way
a runtime would: ``podman create`` + ``podman mount``, /proc, /dev and /sys bound in, a host folder
bound at ``/data`` (a Space's persistent storage), and the image's own entrypoint run by ``chroot``
as uid 1000 with the image's environment.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.helpers import ROOT

BASE_IMAGE = "localhost/bfe-test-base"
TAG = "localhost/bfe:test"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


class ContainerToolsMissing(RuntimeError):
    pass


def _run(*cmd: str, timeout: float = 900) -> str:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])} … failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout.strip()


def check_tools() -> None:
    """Raise with the fix when what the build needs is missing (never a silent skip)."""
    missing = [t for t in ("podman", "mmdebstrap", "chroot", "mount") if shutil.which(t) is None]
    if missing:
        raise ContainerToolsMissing(f"missing {', '.join(missing)}: apt-get install -y podman mmdebstrap (.ci/run does)")
    if os.geteuid() != 0:
        raise ContainerToolsMissing("building and starting the image here needs root (chroot, mounts); CI runs as root")


def pip_find_links() -> str | None:
    """The folder of local wheels pip is configured with (the CPU torch wheel), if any."""
    out = subprocess.run(["pip", "config", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.split("=", 1)[0].endswith("find-links"):
            folder = line.split("=", 1)[1].strip().strip("'\"").split()[0]
            if Path(folder).is_dir():
                return folder
    return None


@dataclass
class Build:
    image: str
    seconds: float
    size_bytes: int


#: What the base is made from (the cached tree's name carries its hash, so a change here makes a new one).
BASE_RECIPE = ("--variant=minbase", "--include=python3,python3-venv,ca-certificates", "bookworm")
#: Where a base tree made by an earlier run is kept, outside the checkout (``BFE_TEST_CACHE`` moves it; CI on a new
#: machine has none and makes its own), and how old it may be before it is made again (Debian's security updates).
CACHE = Path(os.environ.get("BFE_TEST_CACHE") or Path.home() / ".cache" / "bfe-tests")
CACHE_DAYS = 7


def base_tree(folder: Path) -> Path:
    """The Debian base as a tar: the cached one when a recent one is there, else made now with mmdebstrap (and kept
    in the cache for the next run, where the cache can be written). The cache is only a shortcut: without it the
    base is made from nothing, as on a new machine."""
    import hashlib

    name = "base-" + hashlib.sha1(" ".join(BASE_RECIPE).encode()).hexdigest()[:12] + ".tar"
    cached = CACHE / name
    if cached.is_file() and time.time() - cached.stat().st_mtime < CACHE_DAYS * 86400:
        return cached
    tar = folder / name
    _run("mmdebstrap", *BASE_RECIPE, str(tar))
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        shutil.copyfile(tar, partial)
        partial.replace(cached)  # whole or absent: a run killed while copying leaves no half tree behind
    except OSError:
        pass  # a read-only or full cache: the next run makes its own
    return tar


def build(tag: str = TAG) -> Build:
    """Build the Dockerfile (CPU flavour) on a Debian base (:func:`base_tree`); returns the image, build time and size."""
    check_tools()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bfe-base-") as tmp:
        _run("podman", "import", str(base_tree(Path(tmp))), BASE_IMAGE)
    args = ["podman", "build", "--format", "docker", "--isolation=chroot", "--build-arg", f"BASE={BASE_IMAGE}", "-t", tag]
    if Path(CA_BUNDLE).is_file():
        args += ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"]
    if wheels := pip_find_links():
        args += ["--build-arg", "TORCH_INDEX_CPU=", "--build-arg", f"WHEELS={wheels}", "--volume", f"{wheels}:{wheels}:ro"]
    free = shutil.disk_usage("/var/lib/containers" if Path("/var/lib/containers").is_dir() else "/").free
    try:
        _run(*args, str(ROOT), timeout=1800)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        # a failed build leaves its layers behind as a dangling image (1.5 GB): remove them, and say the free disk
        subprocess.run(["podman", "image", "prune", "-f"], capture_output=True)
        raise RuntimeError(f"{e}\n(free disk before the build: {free / 2**30:.1f} GiB; the build needs about 4 GiB)") from None
    size = int(_run("podman", "image", "inspect", "--format", "{{.Size}}", tag))
    return Build(tag, time.monotonic() - t0, size)


@dataclass
class Started:
    url: str
    data: Path  # the host folder mounted at /data
    log: Path


def _image_config(image: str) -> dict:
    return json.loads(_run("podman", "image", "inspect", "--format", "{{json .Config}}", image))


def run_as_user(image: str, root: Path, argv: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``argv`` inside the image's file system, as its user, with its environment, in its working folder."""
    cfg = _image_config(image)
    uid = _run("chroot", str(root), "id", "-u", cfg.get("User") or "root")
    workdir = cfg.get("WorkingDir") or "/"
    return subprocess.run(["chroot", f"--userspec={uid}:{uid}", str(root), "/usr/bin/env", "-i",
                           *(f"{k}={v}" for k, v in _environment(cfg, 0, None).items()),
                           "sh", "-c", f'cd "{workdir}" && exec "$@"', "sh", *argv],
                          capture_output=True, text=True, timeout=timeout)


@contextmanager
def rootfs(image: str, data: Path) -> Iterator[Path]:
    """A writable root filesystem of ``image`` with /proc, /dev, /sys and ``data`` at /data mounted; cleaned up after."""
    cid = _run("podman", "create", image)
    root = Path(_run("podman", "mount", cid))
    mounted: list[Path] = []
    try:
        # What a container runtime provides: /proc, /dev, /sys, and /etc/hosts (Gradio checks http://localhost at start).
        for name in ("etc/hosts", "etc/resolv.conf"):
            (root / name).touch()
        for args, target in ((["-t", "proc", "proc"], "proc"), (["--rbind", "/dev"], "dev"), (["--rbind", "/sys"], "sys"),
                             (["--bind", str(data)], "data"), (["--bind", "/etc/hosts"], "etc/hosts"),
                             (["--bind", "/etc/resolv.conf"], "etc/resolv.conf")):
            _run("mount", *args, str(root / target))
            mounted.append(root / target)
        yield root
    finally:
        for m in reversed(mounted):
            subprocess.run(["umount", "-R", "-l", str(m)], capture_output=True)
        subprocess.run(["podman", "umount", cid], capture_output=True)
        subprocess.run(["podman", "rm", "-f", cid], capture_output=True)


def _environment(cfg: dict, port: int, env: dict[str, str] | None) -> dict[str, str]:
    environment = dict(e.split("=", 1) for e in cfg.get("Env") or [])
    environment.update(PORT=str(port), **(env or {}))
    return environment


def healthcheck(image: str, root: Path, port: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the image's own HEALTHCHECK command inside it, as its user, with its environment."""
    cfg = _image_config(image)
    test = json.loads(_run("podman", "image", "inspect", "--format", "{{json .Config.Healthcheck}}", image))["Test"]
    assert test[0] == "CMD-SHELL", test
    uid = _run("chroot", str(root), "id", "-u", cfg.get("User") or "root")
    return subprocess.run(["chroot", f"--userspec={uid}:{uid}", str(root), "/usr/bin/env", "-i",
                           *(f"{k}={v}" for k, v in _environment(cfg, port, env).items()), "sh", "-c", test[1]],
                          capture_output=True, text=True, timeout=30)


@contextmanager
def start(image: str, root: Path, port: int, env: dict[str, str] | None = None, args: list[str] | None = None,
          log: Path | None = None) -> Iterator[str]:
    """Run the image's entrypoint (and CMD, or ``args``) as its user on ``port``, as a runtime would.

    Yields the base URL once the app answers (Streamlit's health endpoint, or Gradio's API info when
    ``BFE_APP=gradio`` or the argument ``gradio`` picks the Gradio app).
    """
    cfg = _image_config(image)
    environment = _environment(cfg, port, env)
    user = cfg.get("User") or "root"
    uid = _run("chroot", str(root), "id", "-u", user)
    workdir = cfg.get("WorkingDir") or "/"
    argv = [*(cfg.get("Entrypoint") or []), *(args if args is not None else cfg.get("Cmd") or [])]
    command = (argv[1:2] or [environment.get("BFE_APP", "streamlit")])[0]
    shell = f"cd {workdir} && exec " + " ".join(argv)
    log = log or Path(tempfile.mkstemp(prefix="bfe-container-", suffix=".log")[1])
    with open(log, "w") as out:
        proc = subprocess.Popen(["chroot", f"--userspec={uid}:{uid}", str(root), "/usr/bin/env", "-i",
                                 *(f"{k}={v}" for k, v in environment.items()), "sh", "-c", shell],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    probe = f"{url}/_stcore/health" if command == "streamlit" else f"{url}/gradio_api/info"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(probe, timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the container's {command} did not answer:\n{log.read_text()[-3000:]}") from None
                time.sleep(1)
        yield url
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=20)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


# The build started at collection. The build is mostly waiting on the downloads of apt and pip inside it (about a
# quarter of one core on average), so the suite starts it in a process of its own when it collects the container test
# (conftest.pytest_collection_finish) and the test takes the image later: the other tests use the cores meanwhile,
# instead of one pytest worker waiting five to ten minutes. Under ``-n 0`` the test builds the image itself.

def start_early(where: Path, argv: list[str] | None = None) -> bool:
    """Start :func:`build` in a process of its own, once per test run (``where``: a folder the run's workers share),
    and return at once; :func:`take_early` waits for it, :func:`clean_early` stops or removes what nobody took. Returns
    whether this call started it (every worker collects the test; the first one starts the build). ``argv``: another
    command in its place, which writes ``build.json`` into ``where`` whole (the tests of this mechanism)."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(where / "started", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    with open(where / "build.log", "wb") as log:
        # at the lowest priority: the build takes the cycles the tests leave idle, never theirs (its pip compiles every
        # package's bytecode, a core's worth at times, which beside two busy workers slowed the browser tests' pages)
        proc = subprocess.Popen(argv or ["nice", "-n", "19", sys.executable, "-m", "tests.helpers.container", str(where)], cwd=ROOT,
                                stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    partial = where / "pid.partial"
    partial.write_text(f"{proc.pid} {_started_at(proc.pid)}")
    partial.replace(where / "pid")  # whole or absent: another worker's test may read it at once
    return True


def _started_at(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot), "" where it is gone: a pid with another start time is another process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _alive(pid: int, started: str | None = None) -> bool:
    """Whether ``pid`` runs (a finished child its parent has not reaped yet is a zombie: not running), and, given
    ``started``, is still the process that started then (not a later one given the same pid)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and (started is None or fields[19] == started)


def _builder(where: Path, wait: float = 60) -> tuple[int, str]:
    """(pid, start time) of the build :func:`start_early` started, waiting a little for the file that names it."""
    deadline = time.monotonic() + wait
    while not (where / "pid").is_file():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the build started at collection never said its process ({where})")
        time.sleep(0.2)
    pid, started = (where / "pid").read_text().split()
    return int(pid), started


def take_early(where: Path, timeout: float = 2400) -> Build:
    """The image :func:`start_early` built, once it is built (the caller then owns it and removes it). A run stopped
    while this waits leaves the build to :func:`clean_early`."""
    pid, started = _builder(where)
    deadline = time.monotonic() + timeout
    while not (where / "build.json").is_file():
        if not _alive(pid, started) and not (where / "build.json").is_file():
            raise RuntimeError(f"the build started at collection failed:\n{(where / 'build.log').read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the build started at collection took over {timeout:.0f} s:\n{(where / 'build.log').read_text()[-3000:]}")
        time.sleep(1)
    built = Build(**json.loads((where / "build.json").read_text()))
    (where / "taken").touch()
    return built


def clean_early(where: Path, images: tuple[str, ...] = (TAG, BASE_IMAGE)) -> None:
    """At the end of a run: stop a build still running (a run stopped early: ``-x``, Ctrl-C, a timeout) and remove the
    ``images`` of one nobody took, with the layers a stopped build leaves dangling. An image a test took is its own."""
    if not (where / "started").is_file() or (where / "taken").is_file():
        return
    try:
        pid, started = _builder(where, wait=5)
    except RuntimeError:
        return  # nothing was started after all
    stopped = False
    if not (where / "build.json").is_file() and _alive(pid, started):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with suppress(ProcessLookupError):
                os.killpg(pid, sig)
            for _ in range(20):
                if not _alive(pid, started):
                    break
                time.sleep(0.5)
        stopped = True
    if images:
        subprocess.run(["podman", "rmi", "-f", *images], capture_output=True)
        if stopped:
            subprocess.run(["podman", "image", "prune", "-f"], capture_output=True)


def _build_to(where: Path) -> None:
    built = build()
    partial = where / "build.json.partial"
    partial.write_text(json.dumps(asdict(built)))
    partial.replace(where / "build.json")  # whole or absent: the test reads it only once it is there


if __name__ == "__main__":  # the process start_early starts
    _build_to(Path(sys.argv[1]))
