"""What each of the lab's presets claims and spends: the papers' claims (:data:`CLAIMS`, each a comparison of two arms
on one measure, with its source) and the budgets (:data:`BUDGETS`, classroom and thorough, with their measured or
estimated minutes). Data and two small helpers, no torch: the lab's page reads them without paying for a model."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig
from services.lab.presets import TUNING_REPLICATES

DOWNSTREAM_LABELS = {"supersense": "supersense accuracy ({classes} classes)", "wic": "WiC accuracy (2 classes)",
                     "average": "average accuracy over the suite's tasks"}
INTRINSIC_LABELS = {"sop_accuracy": "SOP accuracy (held-out pairs)", "nsp_accuracy": "NSP accuracy (held-out pairs)",
                    "held_out_loss": "Held-out loss", "scaling": "Scaling exponent", "isoflop": "Compute-optimal size",
                    "mutransfer": "Best learning rate across widths (held-out loss)"}
CHANCE = {"sop_accuracy": 0.5, "nsp_accuracy": 0.5, "probe:pos": 0.25}
DATA_LIMITED_TOKENS_PER_PARAMETER = 20  # Hoffmann et al. 2022 (Chinchilla): about 20 tokens per parameter is compute-optimal


@dataclass(frozen=True)
class Claim:
    """One claim of a paper: arm ``a`` ``op`` arm ``b`` on ``measure`` (``downstream`` expands to every task of the
    budget's suite), or the direction of a fitted exponent (``measure`` ``scaling`` / ``isoflop``)."""

    key: str
    measure: str
    statement: str
    source: str
    a: str = ""
    b: str = ""
    op: str = ">"
    margin: float = 0.0
    #: A ratio claim's paper value is matched only when the whole interval lies within this band around it
    #: (relative: 0.25 is ±25%; the fitted exponents' bands are analysis.verdicts.trends.BANDS); see
    #: :data:`PRECONDITIONS` for what every claim asks first.
    band: float = 0.0
    #: A tuned claim (arms ``<a>-lr2e<k>`` / ``<b>-lr2e<k>``): each arm's rate is chosen on the replicates below this
    #: number and the claim decided on the rest (services.lab.claim_entries.tuned); 0: not tuned.
    tuning_replicates: int = 0


CLAIMS: dict[str, tuple[Claim, ...]] = {
    "albert": (
        Claim("sop", "sop_accuracy", "A model trained with SOP solves SOP; one trained with NSP does not (86.5 vs 52.0).",
              "Lan et al. 2019, ALBERT, Table 5 (intrinsic SOP accuracy, ALBERT-base)", "sop", "nsp"),
        Claim("downstream", "downstream", "SOP pre-training helps downstream more than NSP (average 80.1 vs 79.2).",
              "Lan et al. 2019, ALBERT, Table 5 (downstream average of SQuAD1.1/2.0, MNLI, SST-2, RACE, dev)", "sop", "nsp"),
    ),
    "electra": (
        Claim("downstream", "downstream", "At equal pre-training compute, ELECTRA beats masked-LM pre-training downstream.",
              "Clark et al. 2020, ELECTRA, Figure 3 and Table 1 (GLUE dev at equal FLOPs)", "electra", "mlm"),
    ),
    "roberta": (
        Claim("dynamic", "downstream", "Dynamic masking is as good as or slightly better than static (SQuAD 2.0 78.7 vs 78.3, "
              "MNLI-m 84.0 vs 84.3, SST-2 92.9 vs 92.5).", "Liu et al. 2019, RoBERTa, Table 1 (dev)", "dynamic", "static",
              ">=", 0.01),
        Claim("no-nsp", "downstream", "Removing NSP matches or improves downstream results.",
              "Liu et al. 2019, RoBERTa, Table 2 (dev)", "static", "bert-static-nsp", ">=", 0.01),
    ),
    "xlnet": (
        Claim("downstream", "downstream", "With the same data and size, the permutation LM beats BERT's masked LM downstream.",
              "Yang et al. 2019, XLNet, Table 1 (fair comparison with BERT, dev)", "plm", "mlm"),
    ),
    "scaling": (
        Claim("scaling", "scaling", "Held-out loss falls as a power of the non-embedding parameters: L ∝ N^−0.076.",
              "Kaplan et al. 2020, Figure 1 (α_N ≈ 0.076)"),
    ),
    "isoflop": (
        Claim("isoflop", "isoflop", "The compute-optimal size grows with the compute budget: N_opt ∝ C^0.5.",
              "Hoffmann et al. 2022, Chinchilla, Table 2 (approach 2: a = 0.49)"),
    ),
    # Held-out loss is lower-is-better (services.lab.claim_entries.LOWER_IS_BETTER): ">=" with a margin m reads "a's loss is
    # at most m above b's". m = 0.05 nats is a 5% higher perplexity (e^0.05 ≈ 1.05): what "matches" allows here. It is
    # a statement about the effect, not the noise: in a miniature measured here (1 layer × 64, 300 steps of 16, 3 seeds;
    # docs/lab.md) the paired seed differences spread by about 0.1 nats, so a classroom verdict may say "cannot tell".
    "lion": (
        Claim("loss", "held_out_loss", "Lion matches AdamW's loss with one optimizer state instead of two.",
              "Chen et al. 2023, Lion, arXiv 2302.06675, Section 4 (language modelling: Lion matches or beats AdamW) "
              "and Program 1 (one state, the momentum)", "lion", "adamw", ">=", 0.05),
    ),
    "lion-tuned": (
        Claim("loss", "held_out_loss", "Each at its tuned learning rate, Lion matches AdamW's loss with one optimizer "
              "state instead of two.", "Chen et al. 2023, Lion, arXiv 2302.06675, Section 4 (language modelling: Lion "
              "matches or beats AdamW, both tuned)", "lion", "adamw", ">=", 0.05, tuning_replicates=TUNING_REPLICATES),
    ),
    "grow-batch": (
        Claim("loss", "held_out_loss", "Growing the batch reaches the decaying rate's loss on the same tokens, in fewer "
              "parameter updates.", "Smith et al. 2017 (ICLR 2018), Don't Decay the Learning Rate, Increase the Batch "
              "Size, abstract and Section 5.1 (equivalent test accuracy after the same epochs, fewer updates)",
              "grow", "decay", ">=", 0.05),
    ),
    # Lower is better: sparse's held-out loss at most full's + 0.05 nats, a perplexity within 5% (e^0.05 = 1.051) of
    # full attention's; the paper's "matches" is a few points of MLM accuracy at 512 tokens (Table 1). The cost the
    # sparse arm saves is the preset's own (services.lab.claims.bigbird_cost): 27% of the pairs at 32 blocks.
    "bigbird": (
        Claim("sparse", "held_out_loss", "Sparse attention (random + window + global) matches full attention's masked-LM "
              "loss at a fraction of the attention cost.",
              "Zaheer et al. 2020, BigBird, Table 1 (building blocks at 512 tokens) and Figure 1 (the pattern)",
              "sparse", "full", ">=", 0.05),
    ),
    "distil": (
        Claim("retention", "retention", "The distilled student keeps 97% of its teacher's downstream score (GLUE macro "
              "75.2 vs 78.0).", "Sanh et al. 2019, DistilBERT, Table 1 (GLUE dev; '97% of the performance')",
              "distilled", "teacher", ">", 0.97),
        Claim("downstream", "downstream", "Distilled from the teacher, the student beats the same student trained from "
              "scratch at equal compute.", "Sanh et al. 2019, DistilBERT, Table 4 (ablation: the soft targets and the "
              "teacher's initialisation each add GLUE points; equal compute is this lab's control)", "distilled", "scratch"),
        Claim("speedup", "speedup", "The student runs inference 60% faster than its teacher (410 s vs 668 s).",
              "Sanh et al. 2019, DistilBERT, Table 3 (inference time of a full pass of GLUE STS-B on CPU)",
              "distilled", "teacher", ">", 1.0, band=0.25),
    ),
    "mutransfer": (
        Claim("mutransfer", "mutransfer", "Under μP the best learning rate at the narrowest width is within one grid step "
              "(a factor of 2) of the best at the widest; under the standard parametrisation it is not.",
              "Yang et al. 2022, Tensor Programs V, Figure 1 and Figure 3 (the optimum stays put under μP, shifts under SP)"),
    ),
}
@dataclass(frozen=True)
class Precondition:
    """What a claim asks of its arms before any verdict (services.lab.claim_entries.precondition): each arm it applies
    to must beat ``floor`` on the measure measurably (its paired 95% interval over seeds above 0) and materially (by
    at least ``min_gain`` on average). ``floor``: ``counts`` (a loss: the corpus's token counts at the [MASK] inputs,
    where only context tells the word), ``control`` (a downstream or probe score: the same architecture from random
    initialisation), ``chance`` (an intrinsic accuracy: :data:`CHANCE`)."""

    floor: str
    min_gain: float
    why: str


#: Per measure (``downstream:*`` by its prefix). Applies to both arms of a "≥" claim (two models at their floor
#: "match" whatever their method) and to arm ``a`` of a ">" claim (a beats b only if a learnt something).
#: Gains: 0.05 nats is a 5% lower perplexity than the counts'; 0.01 is one point of accuracy.
PRECONDITIONS = {
    "held_out_loss": Precondition("counts", 0.05, "below the corpus's token counts at the [MASK] inputs"),
    "downstream": Precondition("control", 0.01, "above the same architecture from random initialisation"),
    "probe:pos": Precondition("control", 0.01, "above the same architecture from random initialisation"),
    "sop_accuracy": Precondition("chance", 0.01, "above chance (0.5)"),
    "nsp_accuracy": Precondition("chance", 0.01, "above chance (0.5)"),
}


def precondition_of(measure: str) -> Precondition | None:
    """The precondition of a measure (:data:`PRECONDITIONS`); None for one without a floor (a timing)."""
    return PRECONDITIONS.get("downstream" if measure.startswith("downstream:") else measure)


#: A ratio claim's measure → (what the ratio is, the paper's value shown beside it); the floor the claim is decided
#: against is the claim's ``margin``. Retention: the student's over the teacher's downstream average (floor and value
#: the paper's 97%); speed-up: the teacher's over the student's inference time per batch (floor 1: faster at all;
#: value the paper's 668 s / 410 s = 1.63).
RATIO_MEASURES = {"retention": ("student / teacher downstream average", 0.97),
                  "speedup": ("inference speed-up, teacher time / student time per batch", 668 / 410)}


@dataclass(frozen=True)
class Budget:
    """How much a preset spends: seeds, pre-training steps × batch × length, the downstream suite, and (for the
    scaling presets) the widths. ``minutes`` is what it took on the reference machine (measured, or estimated
    from the lab's pace where it says so)."""

    name: str
    seeds: int
    steps: int
    batch: int
    seq_len: int
    downstream: dict[str, Any] | None
    widths: tuple[int, ...] | None = None
    minutes: str = ""


CLASSROOM_SUITE = {"tasks": ["supersense"], "epochs": 3, "max_train": 2000, "max_test": 500}
THOROUGH_SUITE = {"tasks": ["supersense", "wic"], "epochs": 3, "max_train": 6000, "max_test": 1500}
#: What each preset at each budget took and decided here: data, not code (data/lab/budgets-measured.json, which
#: says how each figure was found; the bench outputs it names are committed under bench/results/).
MEASURED_FILE = Path(__file__).resolve().parents[2] / "data" / "lab" / "budgets-measured.json"
_MEASURED: dict[tuple[str, str], dict[str, Any]] = {(e["preset"], e["budget"]): e for e in
                                                     json.loads(MEASURED_FILE.read_text(encoding="utf-8"))["budgets"]}
_MINUTES = {key: e.get("minutes", "") for key, e in _MEASURED.items()}
BUDGETS: dict[str, dict[str, Budget]] = {
    **{p: {"classroom": Budget("classroom", 3, 300, 32, 64, CLASSROOM_SUITE, minutes=_MINUTES[p, "classroom"]),
           "thorough": Budget("thorough", 5, 3000, 64, 64, THOROUGH_SUITE, minutes=_MINUTES[p, "thorough"])}
       for p in ("albert", "electra", "roberta", "xlnet")},
    "scaling": {"classroom": Budget("classroom", 2, 600, 32, 64, None, (16, 32, 64), _MINUTES["scaling", "classroom"]),
                "thorough": Budget("thorough", 3, 4000, 64, 64, None, (32, 64, 128, 256), _MINUTES["scaling", "thorough"])},
    "isoflop": {"classroom": Budget("classroom", 2, 200, 32, 64, None, (16, 32, 64), _MINUTES["isoflop", "classroom"]),
                "thorough": Budget("thorough", 3, 1500, 64, 64, None, (32, 64, 128, 256), _MINUTES["isoflop", "thorough"])},
    # The optimizer presets decide on held-out loss: no downstream suite. 300 steps of batch 32 leave the grow arm's
    # three phases 100 micro-batches each (updates: 100 + 100/5 + 100/25 = 124, against the decay arm's 300).
    **{p: {"classroom": Budget("classroom", 3, 300, 32, 64, None, minutes=_MINUTES[p, "classroom"]),
           "thorough": Budget("thorough", 5, 3000, 64, 64, None, minutes=_MINUTES[p, "thorough"])}
       for p in ("lion", "grow-batch")},
    # The tuned protocol: 5 seeds, 2 to choose each optimizer's rate and 3 fresh ones to decide on (40 runs, the queue's
    # most per experiment: services.lab.run_queue.MAX_QUEUED).
    "lion-tuned": {"classroom": Budget("classroom", 5, 300, 32, 64, None, minutes=_MINUTES["lion-tuned", "classroom"]),
                   "thorough": Budget("thorough", 5, 3000, 64, 64, None, minutes=_MINUTES["lion-tuned", "thorough"])},
    # Long packed sequences: every step costs 4–8 × a default step's tokens, so fewer steps and a small batch.
    "bigbird": {"classroom": Budget("classroom", 2, 120, 8, 256, None, minutes=_MINUTES["bigbird", "classroom"]),
                "thorough": Budget("thorough", 5, 500, 8, 512, None, minutes=_MINUTES["bigbird", "thorough"])},
    "distil": {"classroom": Budget("classroom", 3, 300, 32, 64, CLASSROOM_SUITE, minutes=_MINUTES["distil", "classroom"]),
               "thorough": Budget("thorough", 5, 3000, 64, 64, THOROUGH_SUITE, minutes=_MINUTES["distil", "thorough"])},
    # 6 learning rates × (SP at every width + μP at every width but its base, where it is SP) × 2 seeds: 36 runs, within
    # the queue's 40 per experiment (services.lab.run_queue.MAX_QUEUED), which is why thorough widens the gap between
    # the two widths (32 to 256) and trains longer rather than adding widths, rates or seeds.
    "mutransfer": {"classroom": Budget("classroom", 2, 250, 32, 64, None, (16, 128), _MINUTES["mutransfer", "classroom"]),
                   "thorough": Budget("thorough", 2, 2000, 32, 64, None, (32, 256),
                                      _MINUTES["mutransfer", "thorough"])},
}


def bigbird_cost(config: TrainConfig) -> str:
    """The attention cost a BigBird arm saves, in words: its pattern's score FLOPs and memory over full attention's
    at its length, per layer and head (:func:`analysis.sparse_attention.attention_cost`)."""
    from analysis.sparse_attention import attention_cost

    cost = attention_cost(config.seq_len, config.hidden // config.heads, config.block_size, config.random_blocks)
    return (f"At {config.seq_len} tokens (blocks of {config.block_size}, {config.random_blocks} random) the sparse pattern "
            f"scores {cost.ratio:.0%} of full attention's pairs: {cost.flops_sparse:.3g} against {cost.flops_full:.3g} "
            f"FLOPs for QKᵀ and AV and {cost.bytes_sparse / 2**10:,.0f} against {cost.bytes_full / 2**10:,.0f} KiB of "
            "fp32 scores per layer and head.")


@dataclass(frozen=True)
class Record:
    """What a preset at a budget has decided on this project's machines, from a committed bench output: whether it
    decides its claim, the verdicts (under the current rules), the hardware, and the bench file. Read before Start."""

    decides: bool | None  # True: it reached a decisive label; False: known not to; None: not run to the end here
    said: str
    file: str = ""
    #: The smallest effect the budget's seeds detect with 80% power at a 95% level, from the spread its committed run
    #: measured ((t₀.₉₇₅ + t₀.₈₀) × the effect's standard error, df = seeds − 1): for a "≥" claim, the distance from
    #: the margin it can resolve.
    detectable: str = ""


#: Per (preset, budget), from :data:`MEASURED_FILE` (labels under the rules of issue 54).
DECIDED_HERE: dict[tuple[str, str], Record] = {key: Record(e["decides"], e["said"], e.get("file", ""), e.get("detectable", ""))
                                               for key, e in _MEASURED.items() if "said" in e}


def record_of(preset: str, budget: str) -> Record:
    """What a budget has decided here (:data:`DECIDED_HERE`); a budget never run here says so."""
    return DECIDED_HERE.get((preset, budget), Record(None, "not run to the end on this project's machines yet"))


def budget_of(preset: str, name: str) -> Budget:
    """The named budget of a preset. Raises InvalidConfig for an unknown preset or budget."""
    if preset not in BUDGETS or name not in BUDGETS[preset]:
        raise InvalidConfig(f"No {name!r} budget for the {preset!r} preset.",
                            "Budgets exist for: " + ", ".join(BUDGETS) + " (classroom, thorough).")
    return BUDGETS[preset][name]


def apply_budget(base: TrainConfig, budget: Budget) -> TrainConfig:
    """``base`` with the budget's steps, batch and sequence length."""
    return replace(base, steps=budget.steps, batch=budget.batch, seq_len=budget.seq_len)
