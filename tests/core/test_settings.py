"""Settings: defaults, environment overrides, bad values, and that docs/settings.md documents each one."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import InvalidSetting
from core.settings import SETTINGS, get_settings
from tests.helpers import ROOT

SETTINGS_DOC = ROOT / "docs" / "settings.md"


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BFE_DEVICE", "CPU")
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("BFE_MODEL_CACHE_MB", "64")
    monkeypatch.setenv("DATABASE_URL", "sqlite://")
    monkeypatch.setenv("BFE_ONLINE", "false")
    s = get_settings()
    assert (s.device, s.model_dir, s.cache_bytes, s.database_url, s.online) == ("cpu", tmp_path, 64 * 2**20, "sqlite://", "0")


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for s in SETTINGS:
        monkeypatch.delenv(s.env, raising=False)
    s = get_settings()
    assert s.device == "auto" and s.online == "auto" and s.cache_mb == 3072
    assert "~" not in s.database_url and s.database_url.startswith("sqlite:///")
    assert s.model_dir.is_absolute()
    from models.representations import CORPUS_SENTENCES

    assert s.corpus_sentences == CORPUS_SENTENCES


def test_the_corpus_index_holds_as_many_sentences_as_the_setting_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from models.representations import _corpus_sentences, corpus

    monkeypatch.setenv("BFE_CORPUS_SENTENCES", "250")
    assert _corpus_sentences() == 250 and len(corpus(_corpus_sentences())) == 250
    for bad in ("99", "30001", "many"):
        monkeypatch.setenv("BFE_CORPUS_SENTENCES", bad)
        with pytest.raises(InvalidSetting, match="BFE_CORPUS_SENTENCES"):
            _corpus_sentences()


@pytest.mark.parametrize(("env", "value"), [
    ("BFE_DEVICE", "tpu"), ("BFE_DEVICE", "cpu:0"), ("BFE_MODEL_CACHE_MB", "lots"),
    ("BFE_MODEL_CACHE_MB", "-5"), ("BFE_ONLINE", "maybe"), ("BFE_GRADIO_CONCURRENCY", "0"), ("BFE_GRADIO_CONCURRENCY", "many"),
    ("BFE_LAB_CONCURRENCY", "-1"), ("BFE_LAB_CONCURRENCY", "65"), ("BFE_REPLICAS", "0"), ("BFE_REPLICAS", "lots"),
    ("BFE_REPLICAS", "33"),
])
def test_bad_values_name_the_variable(monkeypatch: pytest.MonkeyPatch, env: str, value: str) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(InvalidSetting, match=env):
        get_settings()


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.env)
def test_the_settings_page_documents_every_setting(setting) -> None:
    rows = [line for line in SETTINGS_DOC.read_text(encoding="utf-8").splitlines() if line.startswith(f"| `{setting.env}` |")]
    assert len(rows) == 1, f"docs/settings.md's table lacks {setting.env} (or has it twice)"
    assert f"| `{setting.default}` |" in rows[0] or setting.default.startswith(("~", "sqlite")), rows[0]


def test_replicas_default_to_one_per_core_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from core.settings import MAX_AUTO_REPLICAS

    monkeypatch.delenv("BFE_REPLICAS", raising=False)
    assert get_settings().replicas == min(os.cpu_count() or 1, MAX_AUTO_REPLICAS)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert get_settings().replicas == MAX_AUTO_REPLICAS
    monkeypatch.setenv("BFE_REPLICAS", "1")
    assert get_settings().replicas == 1


def test_a_replica_may_run_no_training_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """BFE_LAB_CONCURRENCY=0: a web replica that only queues runs (a headless worker elsewhere trains them)."""
    monkeypatch.setenv("BFE_LAB_CONCURRENCY", "0")
    assert get_settings().lab_concurrency == 0


def test_secrets_are_not_shown_on_a_page():
    from core.settings import shown

    assert shown("backend_token", "s3cret") == "(set)" and shown("backend_token", "") == "(not set)"
    assert shown("database_url", "postgresql://bfe:p%40ss@db:5432/results") == "postgresql://bfe:***@db:5432/results"
    assert shown("database_url", "sqlite:////tmp/r.db") == "sqlite:////tmp/r.db"
    assert shown("model_dir", "/srv/models") == "/srv/models"


def test_backend_address_is_checked(monkeypatch):
    import pytest

    from core.errors import InvalidSetting
    from core.settings import get_settings

    monkeypatch.setenv("BFE_BACKEND", "http://gpu-box:7861/")
    assert get_settings().backend == "http://gpu-box:7861"
    for bad in ("ftp://x", "http://a b", "javascript:alert(1)", "http://host/<script>"):
        monkeypatch.setenv("BFE_BACKEND", bad)
        with pytest.raises(InvalidSetting, match="BFE_BACKEND"):
            get_settings()


def test_every_setting_is_declared_once_and_its_default_parses() -> None:
    """One table: each entry of SETTINGS is a field of Settings and nothing else is; each default is read by the
    entry's own parser into the field's value."""
    from dataclasses import fields

    from core import settings as S

    assert sorted(f.name for f in fields(S.Settings)) == sorted(s.name for s in S.SETTINGS)
    assert len({s.env for s in S.SETTINGS}) == len(S.SETTINGS)
    built = S._parse({s.name: s.default for s in S.SETTINGS})
    for s in S.SETTINGS:
        assert getattr(built, s.name) == s.parse(s.default, s.env)
