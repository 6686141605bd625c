"""The family catalog: one frozen :class:`ModelCard` per model, read from ``data/catalog.json``.

Usage::

    from core import registry
    card = registry.get("bert-base-uncased")
    card.parameters          # 109482240, exact count of the transformers base model
    registry.loadable()      # the cards whose weights transformers can load

No torch, no network: this module is safe to import from any page.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.errors import UnknownModel

CATALOG_PATH = Path(__file__).resolve().parent.parent / "data" / "catalog.json"

#: Training objectives, in the order the app lists them, with a short label for charts.
OBJECTIVES: dict[str, str] = {
    "masked-lm": "Masked LM",
    "permutation-lm": "Permutation LM",
    "masked-permuted-lm": "Masked + permuted LM",
    "replaced-token-detection": "Replaced-token detection",
    "causal-lm": "Causal LM",
    "sentence-embedding": "Sentence embedding",
}

#: The heads a checkpoint may carry, as ``models.loader.load(..., task=...)`` names them.
TASKS: tuple[str, ...] = ("base", "masked-lm", "causal-lm", "pretraining", "xlnet-lm", "sequence-classification",
                          "token-classification")


def arxiv_year(arxiv_id: str | None) -> int | None:
    """The year an arXiv id (``YYMM.NNNNN``) was first posted, or None for no or an old-style id."""
    if not isinstance(arxiv_id, str) or len(arxiv_id) < 4 or not arxiv_id[:4].isdigit():
        return None
    return 2000 + int(arxiv_id[:2])


@dataclass(frozen=True)
class ModelCard:
    """One member of the family.

    ``parameters`` is exact for loadable models (the transformers base model, pooler included) and
    the paper's figure for catalog-only ones; ``parameters_reported`` is always the paper's figure.
    ``config`` holds the architecture-fixing keys of the checkpoint's ``config.json``.
    """

    id: str
    hub_id: str | None
    family: str
    architecture: str
    objective: str
    mask_token: str | None
    tokenizer: str
    layers: int | None
    hidden: int | None
    heads: int | None
    vocab_size: int | None
    parameters: int
    parameters_reported: str
    year: int
    paper: str
    arxiv: str | None
    loadable: bool
    tasks: tuple[str, ...]
    key_ideas: tuple[str, ...]
    bundled: bool = False
    notes: str = ""
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def arxiv_year(self) -> int | None:
        """The year of the paper's first arXiv version, read from its id (``1810.04805`` → 2018)."""
        return arxiv_year(self.arxiv)

    @property
    def paper_url(self) -> str | None:
        return f"https://arxiv.org/abs/{self.arxiv}" if self.arxiv else None

    @property
    def model_type(self) -> str | None:
        return self.config.get("model_type")

    @property
    def objective_label(self) -> str:
        return OBJECTIVES[self.objective]


@dataclass(frozen=True)
class Family:
    """A line of models (``bert``, ``roberta`` ...) and the families it descends from."""

    key: str
    name: str
    parents: tuple[str, ...]


@dataclass(frozen=True)
class Catalog:
    models: tuple[ModelCard, ...]
    families: dict[str, Family] = field(hash=False)


def _card(raw: dict[str, Any]) -> ModelCard:
    raw = dict(raw)
    raw["tasks"] = tuple(raw.get("tasks", ()))
    raw["key_ideas"] = tuple(raw.get("key_ideas", ()))
    raw.setdefault("config", {})
    return ModelCard(**raw)


@lru_cache(maxsize=4)
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """Read and validate the catalog file (cached per process).

    Raises:
        ValueError: a record with an unknown objective, task or family, or a duplicate id.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    families = {k: Family(k, v["name"], tuple(v["parents"])) for k, v in data["families"].items()}
    cards = tuple(_card(m) for m in data["models"])
    seen: set[str] = set()
    for card in cards:
        if card.id.lower() in seen:
            raise ValueError(f"catalog: duplicate id {card.id!r}")
        seen.add(card.id.lower())
        if card.objective not in OBJECTIVES:
            raise ValueError(f"catalog: {card.id}: unknown objective {card.objective!r}")
        if card.family not in families:
            raise ValueError(f"catalog: {card.id}: unknown family {card.family!r}")
        if bad := set(card.tasks) - set(TASKS):
            raise ValueError(f"catalog: {card.id}: unknown tasks {sorted(bad)}")
        if card.loadable and not (card.hub_id and card.config):
            raise ValueError(f"catalog: {card.id}: a loadable model needs hub_id and config")
    for fam in families.values():
        if bad := set(fam.parents) - set(families):
            raise ValueError(f"catalog: family {fam.key}: unknown parents {sorted(bad)}")
    return Catalog(cards, families)


def all_models() -> tuple[ModelCard, ...]:
    """Every card, in catalog order."""
    return load_catalog().models


def loadable() -> tuple[ModelCard, ...]:
    """The cards whose weights transformers can load."""
    return tuple(c for c in all_models() if c.loadable)


def families() -> dict[str, Family]:
    return load_catalog().families


def bundled_id() -> str:
    """The id of the model that ships inside a pip package and always works offline."""
    return next(c.id for c in all_models() if c.bundled)


def find(model_id: str) -> ModelCard | None:
    """The card for an id or Hub id (case-insensitive), or None.

    Raises:
        InvalidModelId: ``model_id`` is not text (None, a number, a list ...).
    """
    if not isinstance(model_id, str):
        from core.errors import InvalidModelId

        raise InvalidModelId(f"A model id must be text, not {type(model_id).__name__}.",
                             "Use a catalog id such as 'bert-base-uncased'.")
    key = model_id.strip().lower()
    for card in all_models():
        if key in (card.id.lower(), (card.hub_id or "").lower()):
            return card
    return None


def get(model_id: str) -> ModelCard:
    """The card for ``model_id`` (its catalog id or Hub id, any case).

    Raises:
        UnknownModel: the id is not in the catalog; the error lists close matches.
    """
    card = find(model_id)
    if card is None:
        raise UnknownModel(model_id, suggest(model_id))
    return card


def suggest(model_id: str, n: int = 3) -> list[str]:
    """Catalog ids that look like ``model_id`` (for 'did you mean ...')."""
    ids = [c.id for c in all_models()]
    by_lower = {i.lower(): i for i in ids}
    key = model_id.strip().lower()[:200] if isinstance(model_id, str) else ""
    close = difflib.get_close_matches(key, list(by_lower), n=n, cutoff=0.5)
    if not close:
        close = [i for i in by_lower if key and (key in i or i.split("/")[-1] in key)][:n]
    return [by_lower[c] for c in close]
