"""The pre-training objectives' use cases: fill the mask with several models, score a sentence's pseudo-likelihood,
ask NSP/SOP, play ELECTRA's round, generate left to right, and draw BERT's masking recipe.

The Objectives page and the Gradio ``/fill_mask`` and ``/pseudo_perplexity`` endpoints call these; each checks its
whole request first (texts, the number of models, top k), then runs the model functions through ``call``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.errors import MAX_TEXT_CHARS, ExplorerError
from models.objectives import ACTIONS, Detection, Generation, Prediction, PseudoLikelihood
from services import requests as req
from services.calls import Call, direct

__all__ = ["ACTIONS", "BOUNDS", "FILL_MODES", "MAX_MODELS", "MAX_SENTENCE_CHARS", "Detection", "FillMask", "Generation", "Prediction",
           "PseudoLikelihood", "bert_generate", "discriminate", "electra_round", "fill_mask", "generate", "masking_epochs", "masking_tokens",
           "pseudo_perplexity", "sentence_relation"]
#: Models one fill-mask request runs side by side: the page's four picks and one typed in.
MAX_MODELS = 5
FILL_MODES = ("independent", "sequential")
#: The longest sentence the page's single-sentence boxes take; the API shares it.
MAX_SENTENCE_CHARS = 1_000
#: Epochs of BERT's masking recipe one drawing shows (a row each: past 20 the table stops being read).
MAX_MASKING_EPOCHS = 20
#: The bounds (inclusive) of each number a request takes, by field; the page's widgets, its links and the Gradio tabs use
#: the same. "top_k" is fill-mask's predictions per [MASK], "sampling_top_k" generation's (0: off).
BOUNDS: dict[str, tuple[float, float]] = {"top_k": (1, 20), "seed": (0, 10**6), "new_tokens": (1, 100), "sampling_top_k": (0, 1000),
                                          "temperature": (0.05, 5.0), "top_p": (0.05, 1.0), "epochs": (1, MAX_MASKING_EPOCHS)}


@dataclass(frozen=True)
class FillMask:
    """Each model's top predictions per [MASK] (left to right), and why the others could not run."""

    text: str
    mode: str
    predictions: dict[str, list[list[Prediction]]]
    errors: dict[str, str] = field(default_factory=dict)

    def table(self) -> Any:
        """One row per model × mask × rank: model, mask (from 1), rank, token, probability, step, sequence."""
        import pandas as pd

        rows = [{"model": mid, "mask": mi + 1, "rank": rank, "token": p.token_str.strip(), "probability": p.probability,
                 "step": p.step, "sequence": p.sequence}
                for mid, masks in self.predictions.items() for mi, row in enumerate(masks) for rank, p in enumerate(row, start=1)]
        return pd.DataFrame(rows, columns=["model", "mask", "rank", "token", "probability", "step", "sequence"])

    def best_guess(self, model: str) -> str:
        """The text with each [MASK] replaced by ``model``'s top token, in bold (Markdown)."""
        out = self.text
        for row in self.predictions[model]:
            out = out.replace("[MASK]", f"**{row[0].token_str.strip() or '␣'}**", 1)
        return out

    def to_json(self) -> dict:
        return {"models": {m: [[asdict(p) for p in row] for row in masks] for m, masks in self.predictions.items()},
                "errors": dict(self.errors)}


def fill_mask(text: str, models: Any, top_k: int = 5, mode: str = "independent", *, call: Call = direct) -> FillMask:
    """``text``'s [MASK] tokens filled by each of ``models`` (a list, or comma-separated ids), side by side.

    A model that cannot run (missing, no masked-LM head) is reported in ``errors``; if none can, the error is raised.
    """
    from models import objectives

    text = req.text("The text", text, MAX_TEXT_CHARS, example="The cat sat on the [MASK].")
    top_k, mode = req.bounded("top_k", top_k, BOUNDS), req.choice("mode", mode, FILL_MODES)
    if isinstance(models, list | tuple):
        models = ",".join(str(m) for m in models)
    ids = list(dict.fromkeys(req.model_id(m) for m in req.names(models, MAX_MODELS + 1) or []))
    if not ids:
        raise ExplorerError("Name at least one model.", "For example: bert-base-uncased, roberta-base")
    if len(ids) > MAX_MODELS:
        raise ExplorerError(f"At most {MAX_MODELS} models at once.")
    out, errors = {}, {}
    for mid in ids:
        try:
            out[mid] = call(objectives.fill_mask, mid, text, top_k, mode)
        except ExplorerError as err:
            errors[mid] = str(err)
    if not out:
        raise ExplorerError(" ".join(f"{m}: {e}" for m, e in errors.items()))
    return FillMask(text, mode, out, errors)


def _sentence(name: str, value: Any) -> str:
    return req.text(name, value, MAX_SENTENCE_CHARS, example="A boy plays in the snow.")


def pseudo_perplexity(model: str, sentence: str, *, call: Call = direct) -> PseudoLikelihood:
    """A masked LM's pseudo-log-likelihood of ``sentence`` (Salazar et al. 2020): each token masked in turn."""
    from models.objectives import pseudo_log_likelihood

    return call(pseudo_log_likelihood, req.model_id(model), _sentence("The sentence", sentence))


def sentence_relation(model: str, a: str, b: str, *, call: Call = direct) -> dict[str, float]:
    """NSP (BERT) or SOP (ALBERT): the probability that ``b`` follows ``a``, and swapped."""
    from models.objectives import sentence_relation as relation

    return call(relation, req.model_id(model), _sentence("Sentence A", a), _sentence("Sentence B", b))


def electra_round(generator: str, discriminator: str, text: str, seed: int = 0, *, call: Call = direct) -> tuple[str, Detection]:
    """ELECTRA's game on ``text``: the generator rewrites masked tokens, the discriminator spots them."""
    from models.objectives import electra_round as play

    return call(play, req.model_id(generator), req.model_id(discriminator), _sentence("The sentence", text),
                req.bounded("seed", seed, BOUNDS))


def discriminate(discriminator: str, text: str, original: str, *, call: Call = direct) -> Detection:
    """The discriminator's probability that each token of ``text`` was replaced (``original``: the truth)."""
    from models.objectives import discriminate as judge

    return call(judge, req.model_id(discriminator), _sentence("The rewritten sentence", text),
                _sentence("The original sentence", original))


def generate(model: str, prompt: str, new_tokens: int = 20, sample: bool = False, temperature: float = 1.0, top_k: int = 50,
             top_p: float = 0.95, seed: int = 0, *, call: Call = direct) -> Generation:
    """A causal LM continues ``prompt`` (greedy, or sampled with temperature, top-k and top-p)."""
    from models.objectives import generate as continue_

    return call(continue_, req.model_id(model), _sentence("The prompt", prompt), req.bounded("new_tokens", new_tokens, BOUNDS),
                req.flag("sample", sample), req.number("temperature", temperature, *BOUNDS["temperature"]),
                req.bounded("sampling_top_k", top_k, BOUNDS), req.number("top_p", top_p, *BOUNDS["top_p"]), req.bounded("seed", seed, BOUNDS))


#: New tokens BERT appends one [MASK] at a time: each costs a full forward pass.
MAX_BERT_TOKENS = 20


def bert_generate(model: str, prompt: str, new_tokens: int = 10, *, call: Call = direct) -> Generation:
    """A masked LM 'generates' by appending [MASK] and filling it, again and again (at most :data:`MAX_BERT_TOKENS`)."""
    from models.objectives import bert_generate as fill_on

    return call(fill_on, req.model_id(model), _sentence("The prompt", prompt), min(req.bounded("new_tokens", new_tokens, BOUNDS),
                                                                                    MAX_BERT_TOKENS))


def masking_tokens(model: str, text: str, *, call: Call | None = None) -> tuple[list[str], list[int | None], list[str]]:
    """``text``'s tokens, their word indices and a small vocabulary for random replacements: ``model``'s tokenizer when
    ``call`` is given and works, else the words themselves with [CLS] and [SEP] (the recipe then runs on words)."""
    from models.objectives import word_tokens

    words = _sentence("The sentence", text).split()
    if call is not None:
        try:
            tokens, indices, vocab = call(word_tokens, req.model_id(model), text)
            return tokens, indices, vocab or ["the", "cat", "blue", "ran", "of", "house"]
        except ExplorerError:
            pass
    return ["[CLS]", *words, "[SEP]"], [None, *range(len(words)), None], ["the", "cat", "blue", "ran", "of", "house"]


def masking_epochs(tokens: list[str], words: list[int | None], vocab: list[str], epochs: int = 4, seed: int = 0,
                   dynamic: bool = False, whole_word: bool = False, mask_token: str = "[MASK]") -> list[list[tuple[str, str]]]:
    """BERT's masking recipe over :func:`masking_tokens`' ``tokens``, epoch by epoch: per epoch, (action, token shown)
    for each position (``mask``, ``random``, ``same`` or ``kept``). The reader's choices are checked here: ``epochs``
    (1 to :data:`MAX_MASKING_EPOCHS`), ``seed``, ``dynamic`` (a new pattern each epoch, RoBERTa; else one pattern drawn
    once, BERT) and ``whole_word`` (a word's tokens chosen together)."""
    from models.objectives import masking_epochs as draw

    return draw(tokens, words, vocab, req.bounded("epochs", epochs, BOUNDS), req.bounded("seed", seed, BOUNDS),
                req.flag("dynamic masking", dynamic), req.flag("whole-word masking", whole_word), mask_token)
