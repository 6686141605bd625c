"""Settings, declared once: name, environment variable, default, help and how its text is read (one table,
:data:`SETTINGS`, parsed by one loop into :class:`Settings`).

Each setting is read from the environment every time :func:`get_settings` is called (parsed again only when the
environment changed), so tests and deployments override it with an environment variable and nothing else. The README's settings table
is checked against :data:`SETTINGS` by a test.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import InvalidSetting


def _fail(env: str, raw: str, what: str, hint: str, width: int = 30) -> InvalidSetting:
    return InvalidSetting(f"{env}={raw[:width]!r} {what}", hint)


def _flag(raw: str, env: str) -> bool:
    """1/0/true/false (any case)."""
    value = raw.lower()
    if value not in ("1", "0", "true", "false"):
        raise _fail(env, raw, "is not understood.", "Use 1 or 0.")
    return value in ("1", "true")


def _count(most: int, example: int, least: int = 1, floor: tuple[int, str, str] | None = None) -> Callable[[str, str], int]:
    """A whole number from ``least`` to ``most`` (a concurrency, a size); ``floor``: the least that makes sense when it
    is above ``least`` (the value, the rest of the message after "is below <value>", the hint)."""
    def parse(raw: str, env: str) -> int:
        try:
            value = int(raw)
            if not least <= value <= most:
                raise ValueError
        except ValueError:
            raise _fail(env, raw, f"is not a number from {least} to {most}.", f"Use a small whole number such as {example}.") from None
        if floor and value < floor[0]:
            raise InvalidSetting(f"{env}={value} is below {floor[0]}{floor[1]}", floor[2])
        return value

    return parse


def _device(raw: str, env: str) -> str:
    device = raw.lower()
    if device.split(":")[0] not in _DEVICES or (":" in device and not device.startswith("cuda:")):
        raise InvalidSetting(f"{env}={raw!r} is not a device.", "Use auto, cpu, cuda, cuda:N or mps.")
    return device


def _megabytes(raw: str, env: str) -> int:
    try:
        value = int(raw)
        if value < 0:
            raise ValueError
    except ValueError:
        raise InvalidSetting(f"{env}={raw!r} is not a number of megabytes.", "Use a whole number such as 3072.") from None
    return value


def _online(raw: str, env: str) -> str:
    value = raw.lower()
    if value not in ("auto", "1", "0", "true", "false"):
        raise InvalidSetting(f"{env}={raw!r} is not understood.", "Use auto, 1 or 0.")
    return {"true": "1", "false": "0"}.get(value, value)


def _parameters(raw: str, env: str) -> int:
    try:
        value = int(float(raw))
        if not 1 <= value <= 10**13:
            raise ValueError
    except (ValueError, OverflowError):
        raise _fail(env, raw, "is not a parameter count from 1 to 10^13.", "Use a whole number such as 1000000000.") from None
    return value


def _host(raw: str, env: str) -> str:
    if raw and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", raw):
        raise _fail(env, raw, "is not a name.", "Letters, digits, '.', '_' and '-', at most 100.")
    return raw


def _address(raw: str, env: str) -> str:
    value = raw.rstrip("/")
    if value and not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?", value):
        raise _fail(env, value, "is not an address.", "Use http://host:port or https://host (the address `python -m "
                    "app.backend` printed).", width=60)
    return value


def _replicas(raw: str, env: str) -> int:
    if raw == "auto":
        return min(os.cpu_count() or 1, MAX_AUTO_REPLICAS)
    return _count(MAX_REPLICAS, 2)(raw, env)


def _database_url(raw: str, env: str) -> str:
    if raw.startswith("sqlite:///~"):
        return "sqlite:///" + str(Path(raw[len("sqlite:///"):]).expanduser())
    return raw


def _folder(raw: str, env: str) -> Path:
    return Path(raw).expanduser().resolve()


def _text(raw: str, env: str) -> str:
    return raw


@dataclass(frozen=True)
class Setting:
    """One setting: its attribute name, the environment variable, its default, a help line, and how its text is
    read (``parse(text, env)``: the value, or :class:`InvalidSetting` naming ``env``)."""

    name: str
    env: str
    default: str
    help: str
    parse: Callable[[str, str], Any] = _text


SETTINGS: tuple[Setting, ...] = (
    Setting("device", "BFE_DEVICE", "auto",
            "Where models run: `auto` (CUDA, then Apple MPS, then CPU), `cpu`, `cuda`, `cuda:N` or `mps`.",
            parse=_device),
    Setting("model_dir", "BFE_MODEL_DIR", "~/.local/share/bert-family-explorer/models",
            "Folder of local checkpoints, one sub-folder per model id (e.g. `bert-base-uncased/`); "
            "`python -m models.fetch` fills it. Models load from here first.",
            parse=_folder),
    Setting("cache_mb", "BFE_MODEL_CACHE_MB", "3072",
            "Memory budget in MB for loaded models, shared by all browser sessions; "
            "least recently used models are evicted past it.",
            parse=_megabytes),
    Setting("database_url", "DATABASE_URL", "sqlite:///~/.local/share/bert-family-explorer/results.db",
            "SQLAlchemy URL of the results database (any SQLAlchemy URL, PostgreSQL included).",
            parse=_database_url),
    Setting("online", "BFE_ONLINE", "auto",
            "`auto`: offline when `HF_HUB_OFFLINE=1`, else a 1.5 s check that the Hub answers; "
            "`1`: always try the Hub; `0`: never touch the network.",
            parse=_online),
    Setting("gradio_concurrency", "BFE_GRADIO_CONCURRENCY", "2",
            "Gradio app only: how many model calls run at once; the rest wait in its queue.",
            parse=_count(64, 2)),
    Setting("gradio_mcp", "BFE_GRADIO_MCP", "0",
            "Gradio app only: `1` also serves its endpoints as a Model Context Protocol server at "
            "`/gradio_api/mcp/` (streamable HTTP) so AI assistants can call them as tools; `0`: off. Every endpoint "
            "is read-only either way.",
            parse=_flag),
    Setting("model_concurrency", "BFE_MODEL_CONCURRENCY", "2",
            "Streamlit app: how many model calls run at once across all browser sessions; the rest wait their "
            "turn (a session that leaves gives its place up), and identical calls running at once are computed once.",
            parse=_count(64, 2)),
    Setting("page_concurrency", "BFE_PAGE_CONCURRENCY", "1",
            "Streamlit app: how many page runs (all sessions) execute at once; the rest start as soon as one "
            "ends, and a page waiting for a model call, a chart export, a download or the warm-up lends its place "
            "meanwhile. Python runs one thread at a time, so more only adds switching (a class of 30 on 2 cores: "
            "2.0-2.5x the floor at 1, 3.0x at 2, 2.8-4.1x at 4); put more cores to work with replicas (see Deploying).",
            parse=_count(256, 1)),
    Setting("warmup", "BFE_WARMUP", "1",
            "`1`: when the server starts, import torch and transformers and load the bundled model in the "
            "background, so the first visit to a model page does not wait, and start the labs' queue supervisor "
            "(queued runs resume after a restart without anyone opening the page); `0`: load on first use, and "
            "queued runs start only when a run is submitted or finishes.",
            parse=_flag),
    Setting("model_process", "BFE_MODEL_PROCESS", "1",
            "Streamlit app: `1`: the pages' model calls run in a model process of their own, started with the "
            "server (torch is never imported by the web process, so pages are served at full speed while the model "
            "warms, and a model that crashes or runs out of memory takes no session down: the process is restarted); "
            "`0`: they run in the web process.",
            parse=_flag),
    Setting("backend", "BFE_BACKEND", "",
            "Streamlit app: the address of a model backend (`http://host:port`, started there with `python -m "
            "app.backend`) that runs the pages' model calls, on its GPU; no local model process is started. Empty: "
            "models run on this machine. See docs/deploy.md.",
            parse=_address),
    Setting("backend_token", "BFE_BACKEND_TOKEN", "",
            "The model backend's token: set the same value on the backend and on the front end. A backend without one "
            "listens on 127.0.0.1 only.",
            parse=_text),
    Setting("lab_concurrency", "BFE_LAB_CONCURRENCY", "1",
            "Labs: how many training runs one server runs at once (each in its own background process); the rest "
            "wait in the queue with their position shown. `0`: this server only queues runs, and a headless worker "
            "(`python -m services.lab worker`) on another machine sharing the database trains them.",
            parse=_count(64, 1, least=0)),
    Setting("lab_lease_s", "BFE_LAB_LEASE_S", "60",
            "Labs: a running run's lease, in seconds. Its worker renews it with every progress write (about once a "
            "second); a run whose lease is older than this (its server or worker died, or hangs) is marked "
            "interrupted by any replica, and a hung worker on this host is stopped, so its slot is free again.",
            parse=_count(86_400, 60, floor=(5, " s: a worker writes about once a second, a database may pause for a few.", "Use 60 (the default) or more."))),
    Setting("lab_host", "BFE_LAB_HOST", "",
            "Labs: this replica's name in the shared queue (empty: the machine's hostname). Replicas on one machine "
            "that share `BFE_MODEL_DIR` share its slots; give replicas with their own model folders their own name.",
            parse=_host),
    Setting("lab_memory_mb", "BFE_LAB_MEMORY_MB", "4096",
            "Pre-training lab: the most memory (MB) one run may need, as the memory calculator predicts it "
            "before the run starts; a larger configuration is refused.",
            parse=_count(10**7, 4096)),
    Setting("pack_budget_mb", "BFE_PACK_BUDGET_MB", "256",
            "Saved presentation packs (links): the most megabytes they may take in the database, all of them "
            "together (at least 16; the newest 1,000 are kept as well). Past it, the packs nobody opened in the "
            "last hour go first, the biggest saver's oldest first, so a flood of saves evicts itself before a "
            "teacher's link.",
            parse=_count(10**7, 256, floor=(16, ": one saved pack may take 8 MB.", "Use 16 or more (the default is 256)."))),
    Setting("replicas", "BFE_REPLICAS", "auto",
            "The container's start (deploy/start.sh): how many Streamlit replicas serve the app behind its nginx, with "
            "sticky sessions and one database. `auto`: one per core, at most 4; `1`: one process, no proxy.",
            parse=_replicas),
    Setting("corpus_sentences", "BFE_CORPUS_SENTENCES", "6000",
            "Nearest contexts (exBERT's search): how many WordNet example sentences a model's corpus index holds "
            "(at most 30,000). A model's first search builds its index, one pass over them (the bundled MiniLM: "
            "about 36 s on 2 cores at 6,000); fewer build sooner and offer fewer neighbours.",
            parse=_count(30_000, 6000, floor=(100, ": too few sentences to find neighbours in.", "Use 100 or more (the default is 6000)."))),
    Setting("max_params", "BFE_MAX_PARAMS", "1000000000",
            "Largest model (parameters) that may be loaded; a checkpoint is measured from its config and tensor "
            "headers before any weights are read. The default (10^9, about 4 GB in fp32) suits a 16 GB CPU Space.",
            parse=_parameters),
)

_DEVICES = ("auto", "cpu", "cuda", "mps")
#: ``BFE_REPLICAS=auto``: one replica per core up to this many (each holds its own models; its memory at rest:
#: bench/startup.py, docs/benchmarks.md).
MAX_AUTO_REPLICAS = 4
MAX_REPLICAS = 32


@dataclass(frozen=True)
class Settings:
    """The settings in force, one field per entry of :data:`SETTINGS` (its default is there). Build with
    :func:`get_settings`."""

    device: str
    model_dir: Path
    cache_mb: int
    database_url: str
    online: str
    gradio_concurrency: int
    gradio_mcp: bool
    max_params: int
    corpus_sentences: int
    model_concurrency: int
    page_concurrency: int
    warmup: bool
    model_process: bool
    lab_concurrency: int
    lab_memory_mb: int
    lab_lease_s: int
    lab_host: str
    pack_budget_mb: int
    backend: str
    backend_token: str
    replicas: int

    @property
    def cache_bytes(self) -> int:
        return self.cache_mb * 1024 * 1024


def _raw(setting: Setting) -> str:
    value = os.environ.get(setting.env, "").strip()
    return value or setting.default


#: The environment the settings were last parsed from, and what they gave (a page reads settings several times a run:
#: parsing resolves the model folder on disk each time).
_LAST: list[tuple[tuple[str, ...], Settings]] = []


def get_settings() -> Settings:
    """Read every setting from the environment, falling back to its default (parsed again whenever a variable, the
    home folder, the working folder or the core count changed since the last call).

    Raises:
        InvalidSetting: a value that cannot be used, with the variable's name in the message.
    """
    raw = {s.name: _raw(s) for s in SETTINGS}
    key = (*raw.values(), os.environ.get("HOME", ""), os.getcwd(), str(os.cpu_count()))
    if _LAST and _LAST[0][0] == key:
        return _LAST[0][1]
    settings = _parse(raw)
    _LAST[:] = [(key, settings)]
    return settings


def _parse(raw: dict[str, str]) -> Settings:
    return Settings(**{setting.name: setting.parse(raw[setting.name], setting.env) for setting in SETTINGS})


#: Settings whose value is a secret: never shown on a page.
SECRET_SETTINGS = frozenset({"backend_token"})


def shown(name: str, value: object) -> str:
    """A setting's value as a page may show it: a secret as "(set)" or "(not set)", a database URL without its
    password."""
    if name in SECRET_SETTINGS:
        return "(set)" if value else "(not set)"
    text = str(value)
    if name == "database_url":
        text = re.sub(r"(://[^/:@]*:)[^@/]*@", r"\1***@", text)
    return text
