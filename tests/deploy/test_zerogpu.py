"""The ZeroGPU Space of the model backend (deploy/zerogpu/): assemble.sh makes a folder that holds what the backend
needs and nothing of the repository's tests, benches or environments; its README is a Gradio Space's header with the
pinned Gradio; its app.py refuses to start without a token, asks ZeroGPU for a GPU for model calls only, and serves
the front end's calls with the front-end-only packages absent. ZeroGPU itself cannot run here: a stand-in ``spaces``
module records what would run on its GPU."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT
from tests.helpers.servers import free_port

ZEROGPU = ROOT / "deploy" / "zerogpu"
#: Packages the front end needs and the backend Space does not install: the served code must never import them.
FRONT_END_ONLY = ("streamlit", "plotly", "bertviz", "mcp", "kaleido", "choreographer", "pptx", "umap", "numba", "psycopg")

BLOCKER = f"""
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {FRONT_END_ONLY!r}:
            raise ModuleNotFoundError(f"{{name}} is not installed on the backend's Space", name=name)
sys.meta_path.insert(0, _Block())
"""
#: Stands in for ZeroGPU's ``spaces``: GPU(duration=...) wraps a function and logs each call with the duration asked.
FAKE_SPACES = """
import json, os
def GPU(fn=None, duration=60, **options):
    def wrap(f):
        def on_gpu(*args):
            seconds = duration(*args) if callable(duration) else duration
            with open(os.environ["SPACES_LOG"], "a") as log:
                log.write(json.dumps([f.__name__, seconds]) + "\\n")
            return f(*args)
        return on_gpu
    return wrap(fn) if callable(fn) else wrap
"""


def _pins(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.\[\]-]+)==(\S+)", path.read_text(encoding="utf-8"), flags=re.M))


@pytest.fixture(scope="module")
def space(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("space")
    done = subprocess.run(["bash", str(ZEROGPU / "assemble.sh"), str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return out


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """A clean environment for the Space's process: offline, its own folders, the front-end packages blocked."""
    (tmp / "site").mkdir(exist_ok=True)
    (tmp / "site" / "sitecustomize.py").write_text(BLOCKER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BFE_", "GRADIO_", "PYTHON"))}
    env.update({"PYTHONPATH": str(tmp / "site"), "HF_HUB_OFFLINE": "1", "BFE_ONLINE": "0",
                "BFE_MODEL_DIR": str(tmp / "models"), "GRADIO_ANALYTICS_ENABLED": "False", **extra})
    return env


def test_the_space_holds_what_the_backend_needs_and_nothing_else(space: Path) -> None:
    names = {p.name for p in space.iterdir()}
    assert names == {"README.md", "app.py", "requirements.txt", "pyproject.toml", ".gitattributes", ".bfe-space",
                     "app", "core", "models", "analysis", "services", "data"}
    assert {p.name for p in (space / "app").iterdir()} == {"__init__.py", "backend.py"}  # no pages
    assert not list(space.rglob("__pycache__")) and not list(space.rglob("test_*.py"))
    assert (space / "data" / "catalog.json").is_file() and (space / "data" / "corpus").is_dir()
    # the binaries a git push to the Hub must send through LFS: the corpus's .gz files and the shipped teacher
    assert (space / "data" / "lab" / "teachers" / "distil-h128" / "model.safetensors").is_file()
    rules = set((space / ".gitattributes").read_text(encoding="utf-8").splitlines())
    assert {f"*.{ext} filter=lfs diff=lfs merge=lfs -text" for ext in ("gz", "safetensors")} <= rules


def test_assemble_refills_a_clone_of_the_space_and_refuses_any_other_folder(tmp_path: Path) -> None:
    def assemble(out: Path) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(ZEROGPU / "assemble.sh"), str(out)], capture_output=True, text=True, timeout=60)

    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (clone / "README.md").write_text("---\nsdk: gradio\n---\n")
    assert assemble(clone).returncode == 0
    (clone / "models" / "stale.py").write_text("")  # a file an earlier version had
    assert assemble(clone).returncode == 0  # an earlier assembly is cleared first, git's folder kept
    assert (clone / ".git" / "HEAD").is_file() and not (clone / "models" / "stale.py").exists()
    assert (clone / ".gitattributes").read_text(encoding="utf-8").count("*.safetensors filter=lfs") == 1  # not added twice
    assert (clone / "README.md").read_text(encoding="utf-8") == (ZEROGPU / "README.md").read_text(encoding="utf-8")

    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep me")
    done = assemble(other)
    assert done.returncode == 2 and "mine.txt" in done.stderr
    assert [p.name for p in other.iterdir()] == ["mine.txt"]
    assert assemble(ROOT / "tmp-space").returncode == 2 and assemble(ROOT.parent).returncode == 2
    assert not (ROOT / "tmp-space").exists()


def test_the_readme_is_a_gradio_space_header_with_the_pinned_gradio(space: Path) -> None:
    text = (space / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header = yaml.safe_load(text.split("---\n", 2)[1])
    assert header["sdk"] == "gradio" and header["app_file"] == "app.py" and header["title"] and header["emoji"]
    assert header["sdk_version"] == _pins(ROOT / "requirements.txt")["gradio"]
    assert isinstance(header["python_version"], str) and tuple(map(int, header["python_version"].split("."))) >= (3, 11)
    assert "ZeroGPU" in text and "BFE_BACKEND_TOKEN" in text
    compile((space / "app.py").read_text(encoding="utf-8"), "app.py", "exec")


def test_the_space_pins_the_repositorys_versions_except_torch() -> None:
    repo, space = _pins(ROOT / "requirements.txt"), _pins(ZEROGPU / "requirements.txt")
    assert {k: v for k, v in space.items() if k != "torch"} == {k: repo[k] for k in space if k != "torch"}
    assert "torch" in space and "ZeroGPU" in (ZEROGPU / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^spaces$", (ZEROGPU / "requirements.txt").read_text(encoding="utf-8"), flags=re.M)
    assert not set(space) & set(FRONT_END_ONLY) and "streamlit" in repo


def test_the_backend_imports_from_the_space_alone(space: Path, tmp_path: Path) -> None:
    code = "import app.backend, services.backend.handlers, models.loader; print(app.backend.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=space, env=_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip()).resolve() == (space / "app" / "backend.py").resolve()


@pytest.mark.parametrize("token", [None, "  "])
def test_app_py_refuses_to_start_without_a_token(space: Path, tmp_path: Path, token: str | None) -> None:
    port = free_port()
    env = _env(tmp_path, GRADIO_SERVER_PORT=str(port), **({"BFE_BACKEND_TOKEN": token} if token is not None else {}))
    done = subprocess.run([sys.executable, "app.py"], cwd=space, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "BFE_BACKEND_TOKEN" in done.stderr and "Running on" not in done.stdout + done.stderr
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_model_calls_ask_for_the_gpu_and_the_model_folders_questions_do_not(space: Path, tmp_path: Path) -> None:
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "spaces.py").write_text(FAKE_SPACES)
    log = tmp_path / "gpu.log"
    code = textwrap.dedent("""
        import importlib.util, json
        spec = importlib.util.spec_from_file_location("space_app", "app.py")
        space = importlib.util.module_from_spec(spec); spec.loader.exec_module(space)
        from services.backend.handlers import attention_batch, call
        from core.version import app_version
        from services.backend import wire
        def request(module, name, args):
            return json.dumps({"v": [app_version(), wire.WIRE_VERSION], "module": module, "name": name,
                               "args": wire.encode(args)})
        served_call, served_batch = space.on_gpu(call), space.on_gpu(attention_batch)
        print(json.loads(served_call(request("models.loader", "catalog_availability", []))[0])["ok"] is not None)
        served_call(request("models.interventions", "head_importance", ["nope/../x"]))
        served_call(request("models.objectives", "fill_mask", ["nope/../x", "a [MASK]"]))
        served_batch([request("models.attention", "extract_attention", ["nope/../x", "a"])])
        for hostile in ('{"module": ["x"], "name": {"y": 1}}', "not json", "[1, 2]"):
            assert "error" in json.loads(served_call(hostile)[0])
    """)
    env = _env(tmp_path, SPACES_LOG=str(log), BFE_ZEROGPU_SECONDS="15", BFE_ZEROGPU_LONG_SECONDS="90")
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "fake")
    done = subprocess.run([sys.executable, "-c", code], cwd=space, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"  # answered, and not on the GPU
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["call", 90], ["call", 15], ["attention_batch", 15], ["call", 15], ["call", 15], ["call", 15]]


def test_preload_loads_each_head_the_pages_ask_for(space: Path, tmp_path: Path, tiny_dir: Path) -> None:
    """On ZeroGPU a model loaded during a call is gone by the next one: BFE_BACKEND_PRELOAD names the heads too."""
    code = textwrap.dedent("""
        import importlib.util
        spec = importlib.util.spec_from_file_location("space_app", "app.py")
        space = importlib.util.module_from_spec(spec); spec.loader.exec_module(space)
        space.preload_all(["bert-base-uncased", "bert-base-uncased:masked-lm", "gpt2:masked-lm", "nope/../x:base"])
        from models.loader import default_cache
        print(sorted((e.model_id, e.task) for e in default_cache().info().entries))
    """)
    env = _env(tmp_path, BFE_MODEL_DIR=str(tiny_dir), BFE_DEVICE="cpu")
    done = subprocess.run([sys.executable, "-c", code], cwd=space, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str([("bert-base-uncased", "base"), ("bert-base-uncased", "masked-lm")])
    assert "not preloaded: gpt2:masked-lm" in done.stderr and "not preloaded: nope/../x:base" in done.stderr


@pytest.mark.slow
def test_the_space_serves_a_front_end(space: Path, tmp_path: Path) -> None:
    """app.py started as the Space starts it (the CPU standing in for ZeroGPU): a front end with the token reads its
    info and gets attention through the batching endpoint; a wrong token is refused."""
    from core import registry
    from core.errors import BackendRefused
    from models.attention import extract_attention
    from services.backend.client import Backend

    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "spaces.py").write_text(FAKE_SPACES)
    port, log = free_port(), tmp_path / "gpu.log"
    env = _env(tmp_path, BFE_BACKEND_TOKEN="t0ken", BFE_DEVICE="cpu", GRADIO_SERVER_PORT=str(port), SPACES_LOG=str(log))
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "fake")
    with (tmp_path / "server.log").open("w") as out:
        server = subprocess.Popen([sys.executable, "app.py"], cwd=space, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
                time.sleep(0.3)
        backend = Backend(f"http://127.0.0.1:{port}", "t0ken")
        info = backend.info()
        assert info.models_loaded == 1 and info.kind == "cpu"
        result = backend.call(extract_attention, registry.bundled_id(), "The cat sat on the mat.")
        assert result.weights.shape[-1] == len(result.tokens)
        assert json.loads(log.read_text().splitlines()[-1]) == ["attention_batch", 20]
        with pytest.raises(BackendRefused):
            Backend(f"http://127.0.0.1:{port}", "wrong").info()
    finally:
        server.terminate()
        server.wait(timeout=30)
