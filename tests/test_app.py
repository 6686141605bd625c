"""AppTest of every page: renders with no exception, shows what it should, handles bad states."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
ENTRY = str(ROOT / "app" / "streamlit_app.py")


@pytest.fixture(autouse=True)
def fresh_streamlit_caches() -> None:
    """st.cache_data/st.cache_resource live for the process; each test starts as a new server would."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()


def run(page: str | None = None, **query: str) -> AppTest:
    at = AppTest.from_file(ENTRY, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def test_home_draws_the_family_tree() -> None:
    at = run()
    assert at.title[0].value == "BERT Family Explorer"
    text = markdown(at)
    for model_id in ("bert-base-uncased", "xlnet-base-cased", "gpt-3", "elmo", "sentence-transformers/all-MiniLM-L6-v2"):
        assert model_id in text
    assert "Models run on: CPU" in text
    # the tiny models of the test model dir are ready; the bundled MiniLM too
    assert "9 of 19 downloadable models are on this machine." in text
    assert len(at.get("plotly_chart")) == 1
    assert not at.error
    at.segmented_control(key="home_chart").set_value("Timeline and lineage").run()
    assert not at.exception and len(at.get("plotly_chart")) == 1


def test_home_filters() -> None:
    at = run()
    at.multiselect(key="home_objectives").set_value(["permutation-lm"]).run()
    text = "\n".join(m.value for m in at.main.markdown)
    assert "xlnet-base-cased" in text and "bert-base-uncased" not in text
    at.multiselect(key="home_objectives").set_value([]).run()
    assert "No model matches" in at.info[0].value and not at.exception


def test_presentation_mode_is_kept_in_the_url() -> None:
    at = run(present="1")
    assert at.toggle(key="present").value is True
    assert any("font-size: 22px" in m.value for m in at.markdown)
    at.toggle(key="present").set_value(False).run()
    assert "present" not in at.query_params


def test_models_page_lists_and_loads() -> None:
    at = run("views/models.py")
    assert at.title[0].value == "Models & availability"
    table = at.dataframe[0].value
    assert len(table) == 28 and set(table["status"]) >= {"ready", "downloads on first use", "catalog only (no weights)"}
    at.selectbox(key="models_pick").set_value("gpt2")
    at.button(key="models_load").click().run()
    assert not at.exception
    assert "gpt2 loaded from local folder" in at.success[0].value
    assert at.dataframe[1].value["model"].tolist() == ["gpt2"]


def test_models_page_explains_an_unavailable_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    at = run("views/models.py")
    at.selectbox(key="models_pick").set_value("roberta-large")
    at.button(key="models_load").click().run()
    assert not at.exception
    assert "python -m models.fetch roberta-large" in at.error[0].value


def test_a_bad_setting_is_a_message_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BFE_MODEL_CACHE_MB", "lots")
    at = AppTest.from_file(ENTRY, default_timeout=60).run()
    assert not at.exception
    assert any("BFE_MODEL_CACHE_MB" in e.value for e in at.error)


def test_home_never_imports_torch() -> None:
    """The Home page must not pay for torch/transformers (checked in a clean interpreter)."""
    code = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        f"at = AppTest.from_file({ENTRY!r}, default_timeout=60).run(); "
        "assert not at.exception, at.exception; "
        "heavy = [m for m in ('torch', 'transformers', 'sqlalchemy', 'gradio') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
