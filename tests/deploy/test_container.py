"""The deployment as a Space or container host runs it: build the Dockerfile, start the image, use the app.

One slow test (CI runs it): the CPU image is built on a fresh Debian base (see ``tests/helpers/container.py``
for how, without Docker), started as uid 1000 with a host folder as its persistent storage at /data,
checked with the image's own HEALTHCHECK, drawn in headless Chromium (Home, and the attention page on
the bundled model, offline), given a result through the page's form, which must then be in the
SQLite file under /data; and the same image answers as the Gradio app with ``gradio``.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import ROOT, container, parallel
from tests.helpers.servers import CHROMIUM, CHROMIUM_ARGS, SHOTS, free_port, open_page


def _add_result(page, model: str, value: str, source: str) -> None:
    def pick(label: str, text: str) -> None:
        page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first.click()
        page.keyboard.type(text)
        page.wait_for_timeout(400)
        page.keyboard.press("Enter")
        page.wait_for_timeout(400)

    pick("Model", model)
    page.get_by_placeholder("e.g. 84.6 (percent)").fill(value)
    pick("Source", source)
    page.get_by_role("button", name="Add result").click()
    page.get_by_text("Saved (id").wait_for(timeout=60_000)


@pytest.mark.slow
@pytest.mark.early_start
def test_the_image_builds_starts_healthy_and_keeps_results_on_persistent_storage(tmp_path: Path) -> None:
    """Not a ``machine`` test: its build is mostly pip and apt downloading (a quarter of one core, measured with the
    suite beside it), and its waits (180 s for the app to answer) leave room for a busy core. Under xdist the build
    started at collection (conftest.pytest_collection_finish) and is taken here; under ``-n 0`` it is made here."""
    from playwright.sync_api import sync_playwright

    where = parallel._lock_dir()
    early = where is not None and (where / "container" / "started").is_file()
    built = container.take_early(where / "container") if early else container.build()
    print(f"\nimage {built.image}: built in {built.seconds:.0f} s, {built.size_bytes / 1e9:.2f} GB")
    data = tmp_path / "persistent"
    data.mkdir()
    data.chmod(0o777)  # the container's user (uid 1000) writes here, as on a Space's /data
    try:
        with container.rootfs(built.image, data) as root:
            port = free_port()
            with container.start(built.image, root, port, env={"HF_HUB_OFFLINE": "1"}) as url:
                probe = container.healthcheck(built.image, root, port)
                assert probe.returncode == 0, probe.stderr  # the image's own HEALTHCHECK passes
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                    SHOTS.mkdir(parents=True, exist_ok=True)
                    page, outside = open_page(browser, url + "/", "Longer, bigger, smaller, smarter")
                    page.screenshot(path=str(SHOTS / "container-home.png"))
                    page.close()
                    page, outside2 = open_page(browser, url + "/attention", "what each head of a real model looks at")
                    page.locator(".js-plotly-plot").first.wait_for(timeout=120_000)  # the bundled MiniLM's attention, drawn
                    assert page.locator('[data-testid="stException"]').count() == 0 and "Traceback" not in page.inner_text("body")
                    page.screenshot(path=str(SHOTS / "container-attention.png"))
                    page.close()
                    page, outside3 = open_page(browser, url + "/results?gl_view=Add+results", "Import a CSV")
                    _add_result(page, "Container BERT", "61.5", "Persistent storage check, 2026")
                    page.close()
                    browser.close()
                assert not (outside or outside2 or outside3), (outside, outside2, outside3)
            # server-side chart images: the image's Chromium, driven by kaleido as the app's user, with fonts for
            # non-Latin text (without a CJK font two different three-character titles both draw as three boxes)
            render = container.run_as_user(built.image, root, ["python", "-c", (
                "import sys, plotly.graph_objects as go; from analysis.export import to_png, to_svg; "
                "f = lambda t: go.Figure(go.Scatter(x=[1, 2], y=[2, 1]), layout={'title': t, 'width': 400, 'height': 300}); "
                "a, b = to_png(f('日本語')), to_png(f('中文字')); "
                "assert a[:8] == bytes.fromhex('89504e470d0a1a0a') and a != b; "
                "assert b'<svg' in to_svg(f('x')); print(len(a))")])
            assert render.returncode == 0, render.stderr[-2000:]
            gradio_env, gport = {"HF_HUB_OFFLINE": "1", "BFE_APP": "gradio"}, free_port()
            with container.start(built.image, root, gport, env=gradio_env) as gurl:  # as a Gradio Space runs it
                with urllib.request.urlopen(gurl + "/gradio_api/info", timeout=10) as resp:
                    info = json.loads(resp.read())
                assert "/calculator" in info["named_endpoints"] and "/fill_mask" in info["named_endpoints"]
                assert container.healthcheck(built.image, root, gport, gradio_env).returncode == 0
        db_file = data / "bfe" / "results.db"
        assert db_file.is_file(), sorted(p.name for p in data.rglob("*"))
        with sqlite3.connect(db_file) as con:
            rows = con.execute("SELECT r.value FROM bfe_results r JOIN bfe_models m ON r.model_id = m.id "
                               "WHERE m.name = 'Container BERT'").fetchall()
        assert rows == [(61.5,)]  # written by the app in the container, kept on the host's persistent folder
        assert (data / "bfe" / "models").is_dir() and (data / "huggingface").is_dir()
    finally:
        subprocess.run(["podman", "rmi", "-f", built.image, container.BASE_IMAGE], capture_output=True)


def test_the_dockerfile_follows_the_docker_space_conventions() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG BASE=python:3.11-slim" in text and "FROM ${BASE}" in text
    assert "useradd --create-home --uid 1000" in text and "USER user" in text
    assert "EXPOSE 8501" in text and "HEALTHCHECK" in text and "_stcore/health" in text
    assert "ARG TORCH=cpu" in text and "TORCH_INDEX_CUDA" in text
    readme = (ROOT / "README.md").read_text().split("---")[1]
    assert "sdk: docker" in readme and "app_port: 8501" in readme and "sdk: streamlit" not in readme
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests", "artifacts"} <= set(ignored)
    start = (ROOT / "deploy" / "start.sh").read_text()
    assert "/data/bfe/results.db" in start and "0.0.0.0" in start and "app.replicas" in start
    assert "nginx-light" in text  # the proxy of one replica per core


def test_start_script_puts_data_on_persistent_storage_only_when_it_is_there(tmp_path: Path) -> None:
    """Run deploy/start.sh with a stand-in command: with a writable /data the settings point there, else they stay."""
    script = (ROOT / "deploy" / "start.sh").read_text().replace("/data", str(tmp_path / "data"))
    fake = tmp_path / "start.sh"
    fake.write_text(script)
    show = ["sh", str(fake), "sh", "-c", 'echo "$DATABASE_URL|$BFE_MODEL_DIR|$HF_HOME"']
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": "/home/user/.cache/huggingface"}
    without = subprocess.run(show, capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert without == "||/home/user/.cache/huggingface"
    (tmp_path / "data").mkdir()
    with_data = subprocess.run(show, capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert with_data == f"sqlite:///{tmp_path}/data/bfe/results.db|{tmp_path}/data/bfe/models|{tmp_path}/data/huggingface"
    mine = subprocess.run(show, capture_output=True, text=True, env={**env, "DATABASE_URL": "postgresql://db/x"}, check=True).stdout
    assert mine.startswith("postgresql://db/x|")  # a setting given in the environment wins
    pick = script.replace('exec python -m app.replicas', 'echo streamlit; exit 0; exec python -m app.replicas').replace(
        'exec python -m app.gradio_app', 'echo gradio; exit 0; exec python -m app.gradio_app')
    fake.write_text(pick)
    assert subprocess.run(["sh", str(fake)], capture_output=True, text=True, env=env).stdout.strip() == "streamlit"
    assert subprocess.run(["sh", str(fake)], capture_output=True, text=True, env={**env, "BFE_APP": "gradio"}).stdout.strip() == "gradio"
    assert subprocess.run(["sh", str(fake), "gradio"], capture_output=True, text=True, env=env).stdout.strip() == "gradio"


def test_the_base_tree_is_made_from_nothing_without_a_cache_and_reused_only_while_recent(tmp_path: Path, monkeypatch) -> None:
    """The cache outside the checkout is a shortcut only: an empty or stale one means mmdebstrap runs; a write to it
    that fails leaves the run with its own tree."""
    import os
    import time

    made: list[str] = []

    def fake_run(*cmd: str, timeout: float = 900) -> str:
        assert cmd[0] == "mmdebstrap" and cmd[1:-1] == container.BASE_RECIPE
        made.append(cmd[-1])
        Path(cmd[-1]).write_bytes(b"tree %d" % len(made))
        return ""

    monkeypatch.setattr(container, "_run", fake_run)
    monkeypatch.setattr(container, "CACHE", tmp_path / "cache")
    work = tmp_path / "work"
    work.mkdir()
    first = container.base_tree(work)
    assert len(made) == 1 and first.parent == work and (tmp_path / "cache" / first.name).read_bytes() == b"tree 1"
    again = container.base_tree(work)
    assert len(made) == 1 and again == tmp_path / "cache" / first.name  # recent: reused
    old = time.time() - (container.CACHE_DAYS + 1) * 86400
    os.utime(again, (old, old))
    container.base_tree(work)
    assert len(made) == 2 and again.read_bytes() == b"tree 2"  # stale: made again, and the cache refreshed
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("x")
    monkeypatch.setattr(container, "CACHE", blocked)
    assert container.base_tree(work).read_bytes() == b"tree 3" and len(made) == 3  # an unwritable cache: its own tree
