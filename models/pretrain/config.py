"""A pre-training run described, without torch: objectives, vocabularies, limits, :class:`TrainConfig` (validated
whole, the run's name included, before any work starts), :class:`TrainResult`, and :func:`hf_config` (the
transformers config of the model a run trains, read by the calculator and the lab's planner).

Importing this module costs milliseconds: the lab's page and planner use it without paying for torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InvalidConfig
from models.run_config import check_run_name, check_whole_numbers, from_stored

OBJECTIVES: dict[str, str] = {
    "mlm": "masked LM (BERT, RoBERTa)",
    "mlm+nsp": "masked LM + next sentence prediction (BERT)",
    "mlm+sop": "masked LM + sentence order prediction (ALBERT's task)",
    "electra": "replaced-token detection with a small generator (ELECTRA)",
    "plm": "permutation LM (XLNet)",
    "clm": "left-to-right LM (GPT-2)",
    "distil": "knowledge distillation from a masked-LM teacher (DistilBERT)",
}
DATA = Path(__file__).resolve().parents[2] / "data"
CORPUS = DATA / "corpus" / "wordnet_glosses.txt.gz"
MAX_USER_CORPUS_BYTES = 20 * 2**20
HELD_OUT = 0.02
#: Easy probes from the corpus's own wording (WordNet glosses), for a model's fill-mask.
PROBES = ("a [MASK] of the united states", "the [MASK] of a plant", "any of various [MASK] of the genus",
          "a person who [MASK] in a particular activity", "the act of [MASK] something")
#: name -> (where the vocabulary is, what it is)
VOCABS: dict[str, str] = {
    "wordnet-8k": "8,192-token WordPiece trained on the WordNet glosses (fast: small embeddings and output layer)",
    "bert": "BERT's 30,522-token uncased WordPiece (from the bundled MiniLM)",
}
VOCAB_SIZES = {"wordnet-8k": 8192, "bert": 30522}
LAB_VOCAB = DATA / "corpus" / "wordpiece-8k" / "vocab.txt"
EXAMPLES = CORPUS.parent / "wordnet_examples.txt.gz"
#: The optimizers a run can use (``TrainConfig.optimizer``), as :mod:`analysis.memory` names them.
OPTIMIZERS = {"adamw": "AdamW (two states per parameter)", "lion": "Lion (Chen et al. 2023: one state per parameter)"}
PHASES = ("", "decay", "grow")
MAX_PHASES, MAX_PHASE_FACTOR, MAX_ACCUMULATION = 6, 10, 256  # bounds: the last phase accumulates factor^(phases-1) batches
LIMITS = {"layers": (1, 24), "hidden": (16, 1024), "heads": (1, 16), "ffn": (16, 4096), "seq_len": (16, 512),
          "batch": (1, 512), "steps": (0, 1_000_000)}  # 0 steps: only from a shipped checkpoint (init)
#: name -> what it is (Yang et al. 2022, Tensor Programs V, Table 3)
PARAMETRISATIONS = {"sp": "standard parametrisation (BERT's initialisation, one learning rate)",
                    "mup": "maximal-update parametrisation (μP): the best learning rate carries over across widths"}
MUP_OBJECTIVES = ("mlm", "mlm+nsp", "mlm+sop")


@dataclass(frozen=True)
class TrainConfig:
    """One pre-training run, its fields in four groups (:data:`GROUPS`; each group's fields checked by its own part of
    :meth:`validate`, then the rules between groups): the model's **shape**, the **data** it reads, the **optimiser** and its schedule, and the
    **objective** with what only one objective or parametrisation uses. The fields stay flat, so a stored run (its
    JSON, ``asdict``) and ``replace(config, hidden=...)`` read as before. Sizes are the encoder's (ELECTRA's
    generator is ``generator_ratio`` of its width)."""

    # -- shape: the model
    layers: int = 2
    hidden: int = 128
    heads: int = 2
    ffn: int = 512
    dropout: float = 0.1
    #: "full", or "bigbird": the masked LM's self-attention restricted to BigBird's block-sparse pattern (Zaheer et
    #: al. 2020; the layout of transformers' BigBirdBlockSparseAttention: 2 global blocks, a window of 3 blocks and
    #: ``random_blocks`` random blocks of ``block_size`` tokens, :mod:`models.pretrain.sparse`)
    attention: str = "full"
    block_size: int = 16
    random_blocks: int = 3
    # -- data: what it reads, in what batches
    seq_len: int = 64
    batch: int = 32
    corpus: str = "wordnet"  # or a path to a UTF-8 text file, one text per line
    corpus_lines: int = 20_000  # texts taken from the corpus (the same ones for a seed)
    vocab: str = "wordnet-8k"  # or "bert"
    masking: str = "dynamic"  # or "static": one mask pattern per example, drawn once (BERT's original)
    #: texts concatenated into sequences of exactly ``seq_len`` tokens ([CLS] … [SEP]; RoBERTa's FULL-SENTENCES),
    #: the only way to long sequences from WordNet's short glosses
    pack: bool = False
    # -- optimiser: the updates and their schedule
    steps: int = 200
    lr: float = 1e-3
    warmup: float = 0.06  # share of the steps
    schedule: str = "linear"  # or "constant"
    optimizer: str = "adamw"  # or "lion" (Chen et al. 2023): one state per parameter instead of AdamW's two
    weight_decay: float = 0.01  # decoupled (AdamW's and Lion's λ)
    # Smith et al. 2017 ("Don't decay the learning rate, increase the batch size"): the run's tokens in
    # ``phase_count`` equal parts; at each new part either the rate is divided by ``phase_factor`` ("decay") or the
    # batch multiplied by it through gradient accumulation ("grow"). "" keeps the schedule above.
    phases: str = ""  # "", "decay" or "grow"
    phase_count: int = 3
    phase_factor: int = 5
    # -- objective: what it learns, and what one objective or parametrisation alone uses
    objective: str = "mlm"
    generator_ratio: float = 0.25  # ELECTRA's generator
    disc_weight: float = 50.0  # ELECTRA's discriminator loss weight
    teacher: str = ""  # distil only: the teacher's model id (trained/<run>, or bert-base-uncased)
    # Tensor Programs V (Yang et al. 2022): "sp", the standard parametrisation every other run uses, or "mup", the
    # maximal-update parametrisation (models.pretrain.mup), whose best learning rate carries over across widths; its
    # multipliers are relative to a model of ``mup_base_width`` (where μP and SP coincide).
    parametrisation: str = "sp"
    mup_base_width: int = 32
    #: "" (random initialisation) or a checkpoint the project ships (models.pretrain.shipped: the DistilBERT preset's
    #: teacher) whose weights the run starts from; with 0 steps the run is those weights, evaluated and saved
    init: str = ""
    # -- the run itself
    seed: int = 0
    run: str = ""

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> TrainConfig:
        """The config of a stored run (its JSON may carry extra keys, such as the lab's preset)."""
        return from_stored(cls, stored)

    def group(self, name: str) -> dict[str, Any]:
        """One group's fields and values (``shape``, ``data``, ``optimiser``, ``objective``, ``run``)."""
        return {f: getattr(self, f) for f in GROUPS[name]}

    def validate(self) -> TrainConfig:
        """Raises InvalidConfig for a setting no run can use (heads not dividing the hidden size, zero steps...): each
        group's own fields first, then the rules that tie two groups together (:meth:`_check_combinations`)."""
        if self.objective not in OBJECTIVES:
            raise InvalidConfig(f"Unknown objective {self.objective!r}.", "Use one of: " + ", ".join(OBJECTIVES) + ".")
        check_whole_numbers(self, LIMITS)
        self._check_shape()
        self._check_data()
        self._check_optimiser()
        self._check_objective()
        self._check_combinations()
        check_run_name(self.run_name)
        return self

    def _check_shape(self) -> None:
        if self.hidden % self.heads:
            raise InvalidConfig(f"{self.heads} heads do not divide the hidden size {self.hidden}.",
                                "Each head gets hidden/heads dimensions: pick a head count that divides it.")
        if not 0 <= self.dropout < 1:
            raise InvalidConfig(f"Dropout must be in [0, 1), not {self.dropout!r}.")
        if self.attention not in ("full", "bigbird"):
            raise InvalidConfig(f"Attention is full or bigbird, not {self.attention!r}.")

    def _check_data(self) -> None:
        if self.vocab not in VOCABS:
            raise InvalidConfig(f"Unknown vocabulary {self.vocab!r}.", "Use one of: " + ", ".join(VOCABS) + ".")
        if self.masking not in ("static", "dynamic"):
            raise InvalidConfig(f"Masking is static or dynamic, not {self.masking!r}.")
        if not 10 <= self.corpus_lines <= 1_000_000:
            raise InvalidConfig("corpus_lines must be from 10 to 1,000,000.")
        if type(self.pack) is not bool:
            raise InvalidConfig(f"pack is true or false, not {self.pack!r}.")

    def _check_optimiser(self) -> None:
        if not (0 < self.lr < 1) or not (0 <= self.warmup < 1) or self.schedule not in ("linear", "constant"):
            raise InvalidConfig("The learning rate must be in (0, 1), warm-up in [0, 1), the schedule linear or constant.")
        if self.optimizer not in OPTIMIZERS:
            raise InvalidConfig(f"Unknown optimizer {self.optimizer!r}.", "Use one of: " + ", ".join(OPTIMIZERS) + ".")
        if not (isinstance(self.weight_decay, int | float) and 0 <= self.weight_decay < 10):
            raise InvalidConfig(f"Weight decay must be in [0, 10), not {self.weight_decay!r}.")
        if self.phases not in PHASES:
            raise InvalidConfig(f"Unknown phase schedule {self.phases!r}.", "Use one of: " + ", ".join(repr(p) for p in PHASES) + ".")
        if self.phases:
            check_whole_numbers(self, {"phase_count": (2, MAX_PHASES), "phase_factor": (2, MAX_PHASE_FACTOR)})
            if self.phase_factor ** (self.phase_count - 1) > MAX_ACCUMULATION:
                raise InvalidConfig(f"The last phase would accumulate {self.phase_factor}^{self.phase_count - 1} batches "
                                    f"per update; at most {MAX_ACCUMULATION}.", "Use fewer phases or a smaller factor.")
            if self.steps < self.phase_count * self.phase_factor ** (self.phase_count - 1):
                raise InvalidConfig(f"{self.steps} steps cannot make {self.phase_count} phases with at least one update each "
                                    f"at factor {self.phase_factor}.", "Train for more steps, or use fewer phases.")

    def _check_objective(self) -> None:
        self._check_teacher()
        from models.pretrain.shipped import check_init  # torch-free: the shipped checkpoints' configs

        check_init(self)
        if self.parametrisation not in PARAMETRISATIONS:
            raise InvalidConfig(f"Unknown parametrisation {self.parametrisation!r}.",
                                "Use one of: " + ", ".join(PARAMETRISATIONS) + ".")
        lo, hi = LIMITS["hidden"]
        if isinstance(self.mup_base_width, bool) or not isinstance(self.mup_base_width, int) or not lo <= self.mup_base_width <= hi:
            raise InvalidConfig(f"mup_base_width must be a whole number from {lo} to {hi}, not {self.mup_base_width!r}.")

    def _check_combinations(self) -> None:
        """The rules between groups: what an objective needs of the data and the shape, and what μP is built for."""
        if self.objective == "plm" and self.seq_len % 2:
            raise InvalidConfig("XLNet's permutation collator needs an even sequence length.")
        if self.objective == "electra" and (self.hidden * self.generator_ratio) % self.heads:
            raise InvalidConfig(f"The generator ({self.generator_ratio:g} × {self.hidden}) must be divisible by {self.heads} heads.")
        if self.pack and self.objective != "mlm":
            raise InvalidConfig("Packed sequences are for the masked LM (objective mlm) only.")
        if self.attention == "bigbird":
            from analysis.sparse_attention import check_block_setting  # numpy: only for a run that needs it

            if self.objective != "mlm" or not self.pack:
                raise InvalidConfig("BigBird's sparse attention is for the masked LM on packed sequences.",
                                    "Use objective mlm with pack: short texts would leave nothing for it to skip.")
            check_block_setting(self.seq_len, self.block_size, self.random_blocks)
        if self.parametrisation == "mup" and self.objective not in MUP_OBJECTIVES:
            raise InvalidConfig(f"μP is implemented for BERT's masked-LM objectives, not {self.objective!r}.",
                                "Use one of: " + ", ".join(MUP_OBJECTIVES) + ".")

    def _check_teacher(self) -> None:
        """A distillation run names its teacher by a model id the loader accepts; no other objective has one."""
        if self.objective != "distil":
            if self.teacher:
                raise InvalidConfig(f"Only a distillation run has a teacher ({self.objective} was given {self.teacher!r}).")
            return
        if not self.teacher:
            raise InvalidConfig("A distillation run needs a teacher.",
                                "Name a masked-LM checkpoint: a lab run (trained/<run>) or bert-base-uncased.")
        from models.locate import validate_model_id  # torch-free: the id rules every model load applies

        validate_model_id(self.teacher)

    @property
    def run_name(self) -> str:
        return self.run or f"{self.objective.replace('+', '-')}-{self.layers}x{self.hidden}-{self.steps}s-seed{self.seed}"


#: TrainConfig's fields by group, in declaration order (a test keeps every field in exactly one).
GROUPS: dict[str, tuple[str, ...]] = {
    "shape": ("layers", "hidden", "heads", "ffn", "dropout", "attention", "block_size", "random_blocks"),
    "data": ("seq_len", "batch", "corpus", "corpus_lines", "vocab", "masking", "pack"),
    "optimiser": ("steps", "lr", "warmup", "schedule", "optimizer", "weight_decay", "phases", "phase_count", "phase_factor"),
    "objective": ("objective", "generator_ratio", "disc_weight", "teacher", "parametrisation", "mup_base_width", "init"),
    "run": ("seed", "run"),
}


@dataclass
class TrainResult:
    config: TrainConfig
    curve: list[tuple[int, float]] = field(default_factory=list)
    evaluation: dict[str, Any] = field(default_factory=dict)
    checkpoint: str = ""  # "trained/<run>", a model id the loader takes
    seconds: float = 0.0
    tokens: int = 0
    parameters: int = 0
    stopped: str = ""  # why training ended early ("" when it ran every step)
    processes: int = 1  # data-parallel processes (accelerate launch)
    rank: int = 0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0



def hf_config(config: TrainConfig, part: str = "main") -> tuple[dict[str, Any], str]:
    """(config.json-style dict, head) of the model a run trains, for :mod:`analysis.params` and the memory
    calculator (no torch), and what :func:`build_model` builds. ``part``: ``main`` or, for ELECTRA, ``generator``."""
    c, vocab = config, VOCAB_SIZES[config.vocab]
    positions = max(512, c.seq_len)
    if c.objective in ("mlm", "mlm+nsp", "mlm+sop", "distil"):  # distil: the student
        return ({"model_type": "bert", "hidden_size": c.hidden, "num_hidden_layers": c.layers, "num_attention_heads": c.heads,
                 "intermediate_size": c.ffn, "vocab_size": vocab, "max_position_embeddings": positions, "type_vocab_size": 2},
                "masked-lm" if c.objective in ("mlm", "distil") else "pretraining")
    if c.objective == "electra":
        disc = {"model_type": "electra", "embedding_size": c.hidden, "hidden_size": c.hidden, "num_hidden_layers": c.layers,
                "num_attention_heads": c.heads, "intermediate_size": c.ffn, "vocab_size": vocab,
                "max_position_embeddings": positions, "type_vocab_size": 2}
        if part == "generator":
            return ({**disc, "hidden_size": int(c.hidden * c.generator_ratio),
                     "intermediate_size": max(16, int(c.ffn * c.generator_ratio))}, "masked-lm")
        return disc, "pretraining"
    if c.objective == "plm":
        return ({"model_type": "xlnet", "d_model": c.hidden, "n_layer": c.layers, "n_head": c.heads, "d_inner": c.ffn,
                 "vocab_size": vocab}, "xlnet-lm")
    return ({"model_type": "gpt2", "n_embd": c.hidden, "n_layer": c.layers, "n_head": c.heads, "n_inner": c.ffn,
             "n_positions": positions, "vocab_size": vocab}, "causal-lm")




def trained_dir() -> Path:
    """Where the lab's checkpoints live: ``BFE_MODEL_DIR/trained``."""
    from core.settings import get_settings

    return get_settings().model_dir / "trained"
