"""The lab's presets, the papers' ablations in miniature, and the runs a preset plans from a base configuration:
each arm × the seeds, validated and named before anything is stored."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig
from models.run_config import RUN_NAME, check_run_name
from services.lab.sizing import size

MAX_STEPS = 20_000  # per run from the page (the library allows more, from a shell)
MAX_SEEDS = 10
NAME = RUN_NAME  # what a run or experiment name may be: a folder name under trained/


@dataclass(frozen=True)
class Preset:
    """An ablation in miniature: the runs it starts from a base configuration, and what the paper found.

    ``widths``: the model widths its runs take by default, for a preset whose sizes a budget or the user may replace
    (``runs(base, widths)``; at least ``least_widths`` of them); empty for the others. ``divergence_is_a_result``: its
    grid reaches rates at which a run diverges by design (the top of μTransfer's rate grid under SP), so a run the loop
    stopped on a NaN or infinite loss is a result there (an infinite held-out loss), not a missing run."""

    title: str
    paper: str  # the source of the finding
    finding: str
    runs: Callable[..., list[tuple[str, TrainConfig]]]
    widths: tuple[int, ...] = ()
    least_widths: int = 0
    divergence_is_a_result: bool = False


def _equal_compute(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """ELECTRA and a masked LM of the same width, the MLM given as many steps as ELECTRA's FLOPs buy it (FLOPs as the
    loop performs them: :mod:`models.pretrain.flops`)."""
    electra = replace(base, objective="electra")
    mlm = replace(base, objective="mlm")
    steps = max(1, round(base.steps * size(electra).flops_per_step / size(mlm).flops_per_step))
    return [("electra", electra), ("mlm", replace(mlm, steps=min(steps, MAX_STEPS)))]


SCALING_WIDTHS = (32, 64, 128, 256)
ISOFLOP_BUDGETS = (0.5, 1.0, 2.0)  # × the base run's compute


def _scaling(base: TrainConfig, widths: tuple[int, ...] = SCALING_WIDTHS) -> list[tuple[str, TrainConfig]]:
    """Four widths (the FFN 4× and the heads kept), one token budget: the base run's steps × batch × length."""
    return [(f"h{h}", replace(base, objective=base.objective if base.objective not in ("electra", "plm", "clm") else "mlm",
                              hidden=h, ffn=4 * h, heads=min(base.heads, h // 16) or 1)) for h in widths]


def _isoflop(base: TrainConfig, widths: tuple[int, ...] = SCALING_WIDTHS) -> list[tuple[str, TrainConfig]]:
    """Chinchilla's approach 2 in miniature: for each compute budget, the widths, each trained for the steps that
    budget buys it (so small models see more tokens). The budgets are priced from the middle width of those tried,
    at the base run's steps, so the optimum can fall inside the grid."""
    runs = _scaling(base, widths)
    budget = size(runs[len(runs) // 2][1]).flops_per_step * base.steps
    out = []
    for scale in ISOFLOP_BUDGETS:
        for name, cfg in runs:
            steps = round(scale * budget / size(cfg).flops_per_step)
            out.append((f"c{scale:g}-{name}", replace(cfg, steps=max(1, min(steps, MAX_STEPS)))))
    return out


#: Lion's settings against AdamW's (Chen et al. 2023, arXiv 2302.06675, Section 5): "a suitable learning rate for
#: Lion is typically 3-10x smaller than that for AdamW", and λ "3-10x larger ... to maintain a similar strength"
#: (lr·λ). The lab takes the low end, 3 for both: its runs are a few hundred steps, where a 10× smaller rate would
#: leave Lion far from where AdamW gets; lr·λ stays AdamW's.
LION_LR_DIVISOR = 3
LION_WD_FACTOR = 3


#: The tuned protocol's one learning-rate sweep, the same for both optimizers (log2 rates): AdamW's usual 1e-3 (2^-10)
#: and Lion's 3× smaller one (2^-11.6) both lie inside it, with a step either side.
TUNED_LOG2_RATES = (-12, -11, -10, -9)
#: Replicates 0 and 1 choose each optimizer's rate (validation seeds); the verdict is decided on the others (fresh seeds).
TUNING_REPLICATES = 2


def _lion_tuned(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """Lion and AdamW each over the same learning-rate sweep (:data:`TUNED_LOG2_RATES`), Lion with the paper's larger
    weight decay; the report picks each optimizer's rate on the validation seeds and decides on the fresh ones
    (services.lab.claim_entries.tuned)."""
    return [(f"{name}-lr2e{k}", replace(cfg, lr=2.0 ** k)) for k in TUNED_LOG2_RATES
            for name, cfg in (("lion", replace(base, optimizer="lion", weight_decay=base.weight_decay * LION_WD_FACTOR)),
                              ("adamw", replace(base, optimizer="adamw")))]


def _lion(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """Lion and AdamW at equal steps, Lion with the paper's smaller rate and larger weight decay."""
    return [("lion", replace(base, optimizer="lion", lr=base.lr / LION_LR_DIVISOR, weight_decay=base.weight_decay * LION_WD_FACTOR)),
            ("adamw", replace(base, optimizer="adamw"))]


#: Smith et al. 2017 (ICLR 2018), Section 5.1: the rate divided, or the batch multiplied, by 5 at each step. The
#: lab makes three phases of equal tokens (two steps): the grow arm's last phase accumulates 25 batches per update.
GROW_PHASES, GROW_FACTOR = 3, 5


def _grow(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """The same tokens two ways: a step-decaying rate at a constant batch, or a constant rate and a growing batch
    (gradient accumulation: the memory of one batch). ``base.batch`` is the first phase's batch in both."""
    phased = replace(base, schedule="constant", phase_count=GROW_PHASES, phase_factor=GROW_FACTOR)
    return [("grow", replace(phased, phases="grow")), ("decay", replace(phased, phases="decay"))]


BIGBIRD_BLOCKS = 32  # the bigbird preset cuts a sequence into 32 blocks: each query then scores about 7/32 of the keys
BIGBIRD_RANDOM_BLOCKS = 2


def _bigbird(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """BigBird's sparse attention against full attention: the lab's masked LM on packed sequences of the base's
    length, at equal steps; the sparse arm with 32 blocks of seq_len/32 tokens and 2 random blocks (BigBird-ITC's
    layout: 2 global blocks, a window of 3, :mod:`models.pretrain.sparse`)."""
    full = replace(base, objective="mlm", pack=True, attention="full")
    sparse = replace(full, attention="bigbird", block_size=max(1, base.seq_len // BIGBIRD_BLOCKS),
                     random_blocks=BIGBIRD_RANDOM_BLOCKS)
    return [("sparse", sparse), ("full", full)]


#: A preset arm's teacher before the runs are named: ``trained/<arm>`` means "that arm's run of the same seed"
#: (:func:`plan_runs` puts the run's name in). It is a valid model id, so the arm prices and validates as it will run.
TEACHER_ARM = "teacher"


def _distillation(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """DistilBERT in miniature: a masked LM of the base size (the teacher), a student of half its layers distilled from
    it, and the same student trained from scratch for the steps the distilled run's FLOPs buy it (the teacher's forward
    passes counted in the distilled arm: :func:`models.pretrain.flops.step_flops`)."""
    if base.layers < 2:
        raise InvalidConfig("Distillation halves the teacher's layers: a one-layer teacher leaves a student that is its copy.",
                            "Give the teacher at least 2 layers.")
    teacher = replace(base, objective="mlm", teacher="")
    layers = (base.layers + 1) // 2  # every other layer (models.pretrain.distil.student_layers)
    distilled = replace(base, objective="distil", layers=layers, teacher=f"trained/{TEACHER_ARM}")
    scratch = replace(base, objective="mlm", layers=layers, teacher="")
    steps = max(1, round(base.steps * size(distilled).flops_per_step / size(scratch).flops_per_step))
    return [(TEACHER_ARM, teacher), ("distilled", distilled), ("scratch", replace(scratch, steps=min(steps, MAX_STEPS)))]


#: μTransfer's learning-rate grid: log2 rates a factor of 2 apart, 2^-12 to 2^-7 (Adam). A factor of 2, not 4: under
#: SP Adam's best rate falls about as 1/width, so from width 32 to 128 it moves about two octaves, which a grid of
#: factor-4 steps would call one step (bench/results/verdicts-mutransfer-classroom.txt; docs/lab.md).
MUTRANSFER_LOG2_RATES = (-12, -11, -10, -9, -8, -7)
MUTRANSFER_WIDTHS = (16, 128)  # a custom budget's: 8× (the verdict's least span), 18 runs per seed: 2 seeds fit the queue's 40
#: A μP run at its base width is the SP run of that width (same model, same rates): it is planned once, as SP, and
#: the report counts it under both (:func:`services.lab.mutransfer.points`).


def _mutransfer(base: TrainConfig, widths: tuple[int, ...] = MUTRANSFER_WIDTHS,
                log2_rates: tuple[int, ...] = MUTRANSFER_LOG2_RATES) -> list[tuple[str, TrainConfig]]:
    """Tensor Programs V's Figure 1 in miniature: each parametrisation (SP, μP) × each width (the FFN 4×, one head count
    at every width) × each learning rate of the grid, one masked LM per cell, all at the base
    run's steps, batch and length; the base run's own rate is not used. μP's base width is the narrowest width, so
    there the two parametrisations are the same model, trained once (as SP)."""
    out = []
    # One head count at every width (the narrowest width's): μP's wide model must reduce to the base-width SP run
    # it is compared with, and its attention scale is computed from the head size at the base width.
    heads = min(base.heads, min(widths) // 16) or 1
    for p in ("sp", "mup"):
        for name, cfg in _scaling(replace(base, objective="mlm"), widths):
            if p == "mup" and cfg.hidden == min(widths):
                continue
            for k in log2_rates:
                out.append((f"{p}-{name}-lr2e{k}", replace(cfg, heads=heads, lr=2.0 ** k, parametrisation=p,
                                                            mup_base_width=min(widths))))
    return out


PRESETS: dict[str, Preset] = {
    "single": Preset("One run of the chosen objective", "", "", lambda b: [(b.objective.replace("+", "-"), b)]),
    "roberta": Preset(
        "RoBERTa: static vs dynamic masking, and dropping NSP",
        "Liu et al. 2019, RoBERTa, Table 1 (masking) and Table 2 (NSP), SQuAD/MNLI-m/SST-2 dev",
        "Dynamic masking is as good as or slightly better than static; removing NSP matches or improves downstream "
        "results.",
        lambda b: [("bert-static-nsp", replace(b, objective="mlm+nsp", masking="static")),
                   ("static", replace(b, objective="mlm", masking="static")),
                   ("dynamic", replace(b, objective="mlm", masking="dynamic"))]),
    "albert": Preset(
        "ALBERT: NSP vs SOP",
        "Lan et al. 2019, ALBERT, Table 5 (intrinsic NSP/SOP accuracy and downstream dev)",
        "A model trained with NSP does not solve SOP (about chance); a model trained with SOP solves NSP well.",
        lambda b: [("nsp", replace(b, objective="mlm+nsp")), ("sop", replace(b, objective="mlm+sop"))]),
    "electra": Preset(
        "ELECTRA vs MLM at equal compute",
        "Clark et al. 2020, ELECTRA, Figure 3 and Table 1 (GLUE dev at equal pre-training FLOPs)",
        "Replaced-token detection learns from every token, so at the same compute ELECTRA beats masked LM; here "
        "compare the downstream probe (the losses are different tasks).",
        _equal_compute),
    "xlnet": Preset(
        "XLNet vs BERT",
        "Yang et al. 2019, XLNet, Table 1 (fair comparison with BERT: same data and size) ",
        "The permutation LM predicts each token from any subset of the others without [MASK] tokens; compare the "
        "downstream probe (the losses are different tasks).",
        lambda b: [("plm", replace(b, objective="plm")), ("mlm", replace(b, objective="mlm"))]),
    "scaling": Preset(
        "Scaling: 4 sizes, one budget",
        "Kaplan et al. 2020, Scaling Laws for Neural Language Models, Figure 1 (L(N) = (N_c/N)^α_N, α_N ≈ 0.076)",
        "With data and steps the same, loss falls as a power of the non-embedding parameter count; fit α on the "
        "scaling-laws page.",
        _scaling, widths=SCALING_WIDTHS, least_widths=3),
    "isoflop": Preset(
        "IsoFLOP: 3 budgets × 4 sizes",
        "Hoffmann et al. 2022, Chinchilla, approach 2 (IsoFLOP profiles, Figure 3)",
        "For a fixed compute budget the loss is lowest at a middle size; the best size grows with the budget.",
        _isoflop, widths=SCALING_WIDTHS, least_widths=3),
    "lion": Preset(
        "Lion vs AdamW: one optimizer state instead of two",
        "Chen et al. 2023, Symbolic Discovery of Optimization Algorithms (Lion), arXiv 2302.06675, Program 1 and "
        "Section 5 (hyperparameters)",
        "Lion keeps only a momentum and moves every weight by ±lr (the sign of an interpolated momentum), so it needs "
        "one optimizer state per parameter where AdamW needs two: half the optimizer memory (in fp32 here, 4 bytes "
        "per parameter saved; the report gives each arm's measured state). The paper finds it matches or beats AdamW "
        f"with a {LION_LR_DIVISOR}× smaller rate and a {LION_WD_FACTOR}× larger weight decay, which the lion arm uses.",
        _lion),
    "lion-tuned": Preset(
        "Lion vs AdamW, each tuned: the same learning-rate sweep for both",
        "Chen et al. 2023, Symbolic Discovery of Optimization Algorithms (Lion), arXiv 2302.06675, Section 4 (language "
        "modelling, both optimizers tuned) and Section 5 (hyperparameters)",
        f"Lion matches or beats AdamW on language modelling, each optimizer at its own tuned rate. Here both run the same sweep of "
        f"{len(TUNED_LOG2_RATES)} rates (2^{TUNED_LOG2_RATES[0]} to 2^{TUNED_LOG2_RATES[-1]}); each optimizer's rate is "
        f"chosen on the first {TUNING_REPLICATES} seeds (validation) and the verdict is decided on the other seeds at "
        f"the chosen rates (fresh seeds): the tuning budget is {len(TUNED_LOG2_RATES)} rates × {TUNING_REPLICATES} "
        "seeds per optimizer.",
        _lion_tuned),
    "grow-batch": Preset(
        "Growing batch instead of a decaying rate",
        "Smith, Kindermans, Ying & Le 2017 (ICLR 2018), Don't Decay the Learning Rate, Increase the Batch Size, "
        "abstract and Section 5.1",
        f"Dividing the rate by {GROW_FACTOR} or multiplying the batch by {GROW_FACTOR} lowers SGD's noise alike, so "
        "both arms see the same tokens and should reach the same loss; growing the batch does it in fewer parameter "
        "updates (the report gives each arm's), which parallel hardware turns into time.",
        _grow),
    "bigbird": Preset(
        "BigBird: sparse vs full attention",
        "Zaheer et al. 2020, BigBird, Table 1 (building blocks at 512 tokens: random + window close to BERT-base's MLM) "
        "and Figure 1 (the pattern)",
        "Random, window and global attention together match full attention's masked-LM loss while each query scores "
        "a fixed number of keys: attention's cost grows linearly with the length, not quadratically. Here, at 32 blocks, the "
        "sparse arm scores 27% of the (query, key) pairs: 0.27 × full attention's QKᵀ/AV FLOPs and score memory at 256 "
        "and 512 tokens (analysis.sparse_attention.attention_cost), though the CPU computes them densely under a mask.",
        _bigbird),
    "distil": Preset(
        "DistilBERT: a half-depth student distilled from its teacher",
        "Sanh et al. 2019, DistilBERT, Table 1 (GLUE dev macro score 75.2 vs BERT-base's 78.0, 66 M vs 110 M parameters: "
        "'97% of the performance') and Table 3 (inference 410 s vs 668 s: 60% faster)",
        "A student with half the teacher's layers, started from every other teacher layer and trained on its soft "
        "targets, keeps most of the teacher's downstream score, runs faster, and beats the same student trained "
        "from scratch at equal compute.",
        _distillation),
    "mutransfer": Preset(
        "μTransfer: learning rate × width, SP vs μP",
        "Yang et al. 2022, Tensor Programs V, Figure 1 (training loss against log2 learning rate per width, SP vs μP) "
        "and Figure 3 (transformers)",
        "Under the standard parametrisation the best learning rate shifts as the model widens; under μP it stays put, "
        "so it can be tuned on a narrow model and carried to a wide one.",
        _mutransfer, widths=MUTRANSFER_WIDTHS, least_widths=2, divergence_is_a_result=True),  # the narrowest vs the widest
}


@dataclass(frozen=True)
class Planned:
    """One run of a preset: its name, the arm it belongs to, its replicate (0, 1, … for the seeds) and its config."""

    name: str
    arm: str
    replicate: int
    config: TrainConfig


def plan_runs(preset: str, base: TrainConfig, group: str, seeds: int = 1,
              widths: tuple[int, ...] | None = None) -> list[Planned]:
    """Every run a preset would start: each arm × ``seeds`` replicates (seed ``base.seed + i``), validated and named
    ``<group>-<arm>`` (one seed) or ``<group>-<arm>-s<i>``. ``widths`` replaces the scaling presets' sizes.

    Raises:
        InvalidConfig: an unknown preset, a seed count out of 1–10, steps out of bounds, a name that cannot be a folder.
    """
    if preset not in PRESETS:
        raise InvalidConfig(f"Unknown preset {preset!r}.", "Use one of: " + ", ".join(PRESETS) + ".")
    check_run_name(group)
    if not (type(seeds) is int and 1 <= seeds <= MAX_SEEDS):  # not isinstance: True is an int
        raise InvalidConfig(f"Seeds must be from 1 to {MAX_SEEDS}, not {seeds!r}.")
    if not 1 <= base.steps <= MAX_STEPS:
        raise InvalidConfig(f"Steps must be from 1 to {MAX_STEPS:,} here, not {base.steps:,}.",
                            "Longer runs: python -m models.pretrain from a shell.")
    base.validate()
    chosen = PRESETS[preset]
    if chosen.widths:  # its sizes: the preset's own, or the budget's or user's in their place
        least = chosen.least_widths
        if widths is not None and not (least <= len(widths) <= 6 and all(isinstance(w, int) and 16 <= w <= 1024 for w in widths)
                                       and len(set(widths)) == len(widths)):
            raise InvalidConfig(f"This preset needs {least} to 6 different widths from 16 to 1,024.")
        arms = chosen.runs(base, chosen.widths if widths is None else widths)
    else:
        arms = chosen.runs(base)
    out = []
    labels = {label for label, _ in arms}
    for i in range(seeds):
        names = {label: (group if preset == "single" else f"{group}-{label}") + (f"-s{i}" if seeds > 1 else "")
                 for label, _ in arms}
        for label, cfg in arms:
            arm_teacher = cfg.teacher.removeprefix("trained/") if cfg.teacher.startswith("trained/") else ""
            if arm_teacher in labels:  # a preset's student learns from its teacher arm's run of the same seed
                cfg = replace(cfg, teacher=f"trained/{names[arm_teacher]}")
            out.append(Planned(names[label], label, i, replace(cfg, run=names[label], seed=base.seed + i).validate()))
    return out


def plan(preset: str, base: TrainConfig, group: str, seeds: int = 1) -> list[tuple[str, TrainConfig]]:
    """The (run name, config) pairs a preset would start (:func:`plan_runs`)."""
    return [(p.name, p.config) for p in plan_runs(preset, base, group, seeds)]
