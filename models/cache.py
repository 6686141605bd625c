"""The process-wide model cache: loaded models shared by every browser session, bounded in memory.

:class:`ModelCache` keeps :class:`models.loader.LoadedModel` objects by (model, task, attention,
device), evicting the least recently used past the memory-budget setting; :func:`default_cache`
is the one the app uses. Two sessions asking for the same model at once load it once.
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.settings import get_settings

if TYPE_CHECKING:
    from models.loader import LoadedModel


@dataclass(frozen=True)
class CacheEntry:
    model_id: str
    task: str
    attn_implementation: str
    device: str
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class CacheInfo:
    """What the model cache holds, most recently used last."""

    entries: tuple[CacheEntry, ...]
    total_bytes: int
    budget_bytes: int
    evictions: int


CacheKey = tuple[str, str, str, str]


class ModelCache:
    """Loaded models shared by the whole process, bounded by ``budget_bytes`` (LRU eviction).

    Thread-safe: two sessions asking for the same model at once load it once. A single model larger
    than the budget is still kept (alone), so the page that asked for it works.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[CacheKey, LoadedModel] = OrderedDict()
        self._lock = threading.RLock()
        self._key_locks: dict[CacheKey, threading.Lock] = {}
        self._evictions = 0

    def get_or_load(self, key: CacheKey, factory: Callable[[], LoadedModel]) -> LoadedModel:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key]
            loaded = factory()
            with self._lock:
                self._entries[key] = loaded
                self._evict(keep=key)
            return loaded

    def _evict(self, keep: CacheKey) -> None:
        evicted = False
        while self._total() > self.budget_bytes and len(self._entries) > 1:
            oldest = next(k for k in self._entries if k != keep)
            del self._entries[oldest]
            self._evictions += 1
            evicted = True
        if evicted:
            _release_memory()

    def _total(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def info(self) -> CacheInfo:
        with self._lock:
            entries = tuple(
                CacheEntry(m.model_id, m.task, m.attn_implementation, str(m.device), str(m.dtype).replace("torch.", ""),
                           m.nbytes)
                for m in self._entries.values()
            )
            return CacheInfo(entries, self._total(), self.budget_bytes, self._evictions)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
        _release_memory()


def _release_memory() -> None:
    gc.collect()
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


_default_cache: ModelCache | None = None
_default_cache_lock = threading.Lock()


def default_cache() -> ModelCache:
    """The process-wide cache, created on first use with the memory-budget setting."""
    global _default_cache
    with _default_cache_lock:
        if _default_cache is None:
            _default_cache = ModelCache(get_settings().cache_bytes)
        return _default_cache
