"""Settings, declared once: name, environment variable, default, help.

Each setting is read from the environment every time :func:`get_settings` is called, so tests and
deployments override it with an environment variable and nothing else. The README's settings table
is checked against :data:`SETTINGS` by a test.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import InvalidSetting


@dataclass(frozen=True)
class Setting:
    """One setting: its attribute name, the environment variable, its default and a help line."""

    name: str
    env: str
    default: str
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("device", "BFE_DEVICE", "auto",
            "Where models run: `auto` (CUDA, then Apple MPS, then CPU), `cpu`, `cuda`, `cuda:N` or `mps`."),
    Setting("model_dir", "BFE_MODEL_DIR", "~/.local/share/bert-family-explorer/models",
            "Folder of local checkpoints, one sub-folder per model id (e.g. `bert-base-uncased/`); "
            "`python -m models.fetch` fills it. Models load from here first."),
    Setting("cache_mb", "BFE_MODEL_CACHE_MB", "3072",
            "Memory budget in MB for loaded models, shared by all browser sessions; "
            "least recently used models are evicted past it."),
    Setting("database_url", "DATABASE_URL", "sqlite:///~/.local/share/bert-family-explorer/results.db",
            "SQLAlchemy URL of the results database (any SQLAlchemy URL, PostgreSQL included)."),
    Setting("online", "BFE_ONLINE", "auto",
            "`auto`: offline when `HF_HUB_OFFLINE=1`, else a 1.5 s check that the Hub answers; "
            "`1`: always try the Hub; `0`: never touch the network."),
    Setting("gradio_concurrency", "BFE_GRADIO_CONCURRENCY", "2",
            "Gradio app only: how many model calls run at once; the rest wait in its queue."),
    Setting("gradio_mcp", "BFE_GRADIO_MCP", "0",
            "Gradio app only: `1` also serves its endpoints as a Model Context Protocol server at "
            "`/gradio_api/mcp/` (streamable HTTP) so AI assistants can call them as tools; `0`: off. Every endpoint "
            "is read-only either way."),
    Setting("model_concurrency", "BFE_MODEL_CONCURRENCY", "2",
            "Streamlit app: how many model calls run at once across all browser sessions; the rest wait their "
            "turn (a session that leaves gives its place up), and identical calls running at once are computed once."),
    Setting("page_concurrency", "BFE_PAGE_CONCURRENCY", "1",
            "Streamlit app: how many page runs (all sessions) execute at once; the rest start as soon as one "
            "ends, and a page waiting for a model call, a chart export, a download or the warm-up lends its place "
            "meanwhile. Python runs one thread at a time, so more only adds switching (a class of 30 on 2 cores: "
            "2.0-2.5x the floor at 1, 3.0x at 2, 2.8-4.1x at 4); put more cores to work with replicas (see Deploying)."),
    Setting("warmup", "BFE_WARMUP", "1",
            "`1`: when the server starts, import torch and transformers and load the bundled model in the "
            "background, so the first visit to a model page does not wait, and start the labs' queue supervisor "
            "(queued runs resume after a restart without anyone opening the page); `0`: load on first use, and "
            "queued runs start only when a run is submitted or finishes."),
    Setting("model_process", "BFE_MODEL_PROCESS", "1",
            "Streamlit app: `1`: the pages' model calls run in a model process of their own, started with the "
            "server (torch is never imported by the web process, so pages are served at full speed while the model "
            "warms, and a model that crashes or runs out of memory takes no session down: the process is restarted); "
            "`0`: they run in the web process."),
    Setting("backend", "BFE_BACKEND", "",
            "Streamlit app: the address of a model backend (`http://host:port`, started there with `python -m "
            "app.backend`) that runs the pages' model calls, on its GPU; no local model process is started. Empty: "
            "models run on this machine. See docs/deploy.md."),
    Setting("backend_token", "BFE_BACKEND_TOKEN", "",
            "The model backend's token: set the same value on the backend and on the front end. A backend without one "
            "listens on 127.0.0.1 only."),
    Setting("lab_concurrency", "BFE_LAB_CONCURRENCY", "1",
            "Labs: how many training runs one server runs at once (each in its own background process); the rest "
            "wait in the queue with their position shown. `0`: this server only queues runs, and a headless worker "
            "(`python -m services.lab worker`) on another machine sharing the database trains them."),
    Setting("lab_lease_s", "BFE_LAB_LEASE_S", "60",
            "Labs: a running run's lease, in seconds. Its worker renews it with every progress write (about once a "
            "second); a run whose lease is older than this (its server or worker died, or hangs) is marked "
            "interrupted by any replica, and a hung worker on this host is stopped, so its slot is free again."),
    Setting("lab_host", "BFE_LAB_HOST", "",
            "Labs: this replica's name in the shared queue (empty: the machine's hostname). Replicas on one machine "
            "that share `BFE_MODEL_DIR` share its slots; give replicas with their own model folders their own name."),
    Setting("lab_memory_mb", "BFE_LAB_MEMORY_MB", "4096",
            "Pre-training lab: the most memory (MB) one run may need, as the memory calculator predicts it "
            "before the run starts; a larger configuration is refused."),
    Setting("pack_budget_mb", "BFE_PACK_BUDGET_MB", "256",
            "Saved presentation packs (links): the most megabytes they may take in the database, all of them "
            "together (at least 16; the newest 1,000 are kept as well). Past it, the packs nobody opened in the "
            "last hour go first, the biggest saver's oldest first, so a flood of saves evicts itself before a "
            "teacher's link."),
    Setting("replicas", "BFE_REPLICAS", "auto",
            "The container's start (deploy/start.sh): how many Streamlit replicas serve the app behind its nginx, with "
            "sticky sessions and one database. `auto`: one per core, at most 4; `1`: one process, no proxy."),
    Setting("max_params", "BFE_MAX_PARAMS", "1000000000",
            "Largest model (parameters) that may be loaded; a checkpoint is measured from its config and tensor "
            "headers before any weights are read. The default (10^9, about 4 GB in fp32) suits a 16 GB CPU Space."),
)

_DEVICES = ("auto", "cpu", "cuda", "mps")
#: ``BFE_REPLICAS=auto``: one replica per core up to this many (each holds its own models: ~600 MB at rest).
MAX_AUTO_REPLICAS = 4
MAX_REPLICAS = 32


@dataclass(frozen=True)
class Settings:
    """The settings in force. Build with :func:`get_settings`."""

    device: str
    model_dir: Path
    cache_mb: int
    database_url: str
    online: str
    gradio_concurrency: int = 2
    gradio_mcp: bool = False
    max_params: int = 1_000_000_000
    model_concurrency: int = 2
    page_concurrency: int = 1
    warmup: bool = True
    model_process: bool = True
    lab_concurrency: int = 1
    lab_memory_mb: int = 4096
    lab_lease_s: int = 60
    lab_host: str = ""
    pack_budget_mb: int = 256
    backend: str = ""
    backend_token: str = ""
    replicas: int = 1

    @property
    def cache_bytes(self) -> int:
        return self.cache_mb * 1024 * 1024


def _raw(setting: Setting) -> str:
    value = os.environ.get(setting.env, "").strip()
    return value or setting.default


def _count(raw: dict[str, str], name: str, env: str, most: int, example: int, least: int = 1) -> int:
    """A whole number from ``least`` to ``most`` (a concurrency), or InvalidSetting naming ``env``."""
    try:
        value = int(raw[name])
        if not least <= value <= most:
            raise ValueError
    except ValueError:
        raise InvalidSetting(f"{env}={raw[name][:30]!r} is not a number from {least} to {most}.",
                             f"Use a small whole number such as {example}.") from None
    return value


#: The environment the settings were last parsed from, and what they gave (a page reads settings several times a run:
#: parsing resolves the model folder on disk each time).
_LAST: list[tuple[tuple[str, ...], Settings]] = []


def get_settings() -> Settings:
    """Read every setting from the environment, falling back to its default (parsed again whenever a variable, the
    home folder or the working folder changed since the last call).

    Raises:
        InvalidSetting: a value that cannot be used, with the variable's name in the message.
    """
    raw = {s.name: _raw(s) for s in SETTINGS}
    key = (*raw.values(), os.environ.get("HOME", ""), os.getcwd())
    if _LAST and _LAST[0][0] == key:
        return _LAST[0][1]
    settings = _parse(raw)
    _LAST[:] = [(key, settings)]
    return settings


def _parse(raw: dict[str, str]) -> Settings:
    device = raw["device"].lower()
    if device.split(":")[0] not in _DEVICES or (":" in device and not device.startswith("cuda:")):
        raise InvalidSetting(f"BFE_DEVICE={raw['device']!r} is not a device.",
                             "Use auto, cpu, cuda, cuda:N or mps.")
    try:
        cache_mb = int(raw["cache_mb"])
        if cache_mb < 0:
            raise ValueError
    except ValueError:
        raise InvalidSetting(f"BFE_MODEL_CACHE_MB={raw['cache_mb']!r} is not a number of megabytes.",
                             "Use a whole number such as 3072.") from None
    online = raw["online"].lower()
    if online not in ("auto", "1", "0", "true", "false"):
        raise InvalidSetting(f"BFE_ONLINE={raw['online']!r} is not understood.", "Use auto, 1 or 0.")
    online = {"true": "1", "false": "0"}.get(online, online)
    gradio_concurrency = _count(raw, "gradio_concurrency", "BFE_GRADIO_CONCURRENCY", 64, 2)
    try:
        max_params = int(float(raw["max_params"]))
        if not 1 <= max_params <= 10**13:
            raise ValueError
    except (ValueError, OverflowError):
        raise InvalidSetting(f"BFE_MAX_PARAMS={raw['max_params'][:30]!r} is not a parameter count from 1 to 10^13.",
                             "Use a whole number such as 1000000000.") from None
    model_concurrency = _count(raw, "model_concurrency", "BFE_MODEL_CONCURRENCY", 64, 2)
    page_concurrency = _count(raw, "page_concurrency", "BFE_PAGE_CONCURRENCY", 256, 1)
    lab_concurrency = _count(raw, "lab_concurrency", "BFE_LAB_CONCURRENCY", 64, 1, least=0)
    lab_memory_mb = _count(raw, "lab_memory_mb", "BFE_LAB_MEMORY_MB", 10**7, 4096)
    lab_lease_s = _count(raw, "lab_lease_s", "BFE_LAB_LEASE_S", 86_400, 60)
    if lab_lease_s < 5:
        raise InvalidSetting(f"BFE_LAB_LEASE_S={lab_lease_s} is below 5 s: a worker writes about once a second, a "
                             "database may pause for a few.", "Use 60 (the default) or more.")
    lab_host = raw["lab_host"]
    if lab_host and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", lab_host):
        raise InvalidSetting(f"BFE_LAB_HOST={lab_host[:30]!r} is not a name.", "Letters, digits, '.', '_' and '-', at most 100.")
    pack_budget_mb = _count(raw, "pack_budget_mb", "BFE_PACK_BUDGET_MB", 10**7, 256)
    if pack_budget_mb < 16:
        raise InvalidSetting(f"BFE_PACK_BUDGET_MB={pack_budget_mb} is below 16: one saved pack may take 8 MB.",
                             "Use 16 or more (the default is 256).")
    warmup = raw["warmup"].lower()
    if warmup not in ("1", "0", "true", "false"):
        raise InvalidSetting(f"BFE_WARMUP={raw['warmup'][:30]!r} is not understood.", "Use 1 or 0.")
    gradio_mcp = raw["gradio_mcp"].lower()
    if gradio_mcp not in ("1", "0", "true", "false"):
        raise InvalidSetting(f"BFE_GRADIO_MCP={raw['gradio_mcp'][:30]!r} is not understood.", "Use 1 or 0.")
    model_process = raw["model_process"].lower()
    if model_process not in ("1", "0", "true", "false"):
        raise InvalidSetting(f"BFE_MODEL_PROCESS={raw['model_process'][:30]!r} is not understood.", "Use 1 or 0.")
    backend = raw["backend"].rstrip("/")
    if backend and not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?", backend):
        raise InvalidSetting(f"BFE_BACKEND={backend[:60]!r} is not an address.", "Use http://host:port or "
                             "https://host (the address `python -m app.backend` printed).")
    replicas = min(os.cpu_count() or 1, MAX_AUTO_REPLICAS) if raw["replicas"] == "auto" else \
        _count(raw, "replicas", "BFE_REPLICAS", MAX_REPLICAS, 2)
    database_url = raw["database_url"]
    if database_url.startswith("sqlite:///~"):
        database_url = "sqlite:///" + str(Path(database_url[len("sqlite:///"):]).expanduser())
    return Settings(
        device=device,
        model_dir=Path(raw["model_dir"]).expanduser().resolve(),
        cache_mb=cache_mb,
        database_url=database_url,
        online=online,
        gradio_concurrency=gradio_concurrency,
        gradio_mcp=gradio_mcp in ("1", "true"),
        max_params=max_params,
        model_concurrency=model_concurrency,
        page_concurrency=page_concurrency,
        warmup=warmup in ("1", "true"),
        model_process=model_process in ("1", "true"),
        lab_concurrency=lab_concurrency,
        lab_memory_mb=lab_memory_mb,
        lab_lease_s=lab_lease_s,
        lab_host=lab_host,
        pack_budget_mb=pack_budget_mb,
        backend=backend,
        backend_token=raw["backend_token"],
        replicas=replicas,
    )


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
