"""The labs' queue as workers would leave it: finished experiments with settled verdicts, a trained checkpoint, and a
run's status."""

from __future__ import annotations


def run_status(rid: int) -> str:
    from analysis.results_db import runs

    return runs.get_run(rid)["status"]


def seed_lab(tag: str = "seeded") -> dict[str, str]:
    """Finished runs in the labs' queue, as workers would leave them, without training: an ALBERT ablation (two arms ×
    3 seeds, with curves, SOP accuracy, a downstream score per item and its random-init control, the POS probe), a
    scaling experiment (3 widths × 2 seeds, held-out losses on a power law) and a fine-tuning experiment (the bundled
    MiniLM, fine-tuned and frozen, 2 seeds each). Their verdicts are settled. Returns the experiments' names."""
    import math

    from analysis.results_db import runs
    from core import registry
    from models.finetune import FineTuneConfig, run_label
    from models.pretrain import TrainConfig
    from services import lab
    from services.lab import experiments

    tiny = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200)
    suite = {"tasks": ["supersense"], "epochs": 1, "max_train": 40, "max_test": 30, "max_len": 32}
    names = {"albert": f"{tag}-albert", "scaling": f"{tag}-scaling", "finetune": f"{tag}-ft"}

    def close(rid: int, evaluation: dict, tokens: int = 7680) -> None:
        runs.start_run(rid)
        runs.record_curve(rid, [(s, 9.0 - 2.0 * math.log1p(s) / math.log1p(30)) for s in range(1, 31)], seconds=3.0)
        runs.finish_run(rid, "finished", evaluation=evaluation, tokens=tokens, seconds=3.0, parameters=10_000)

    for rid in lab.submit("albert", tiny, names["albert"], seeds=3, downstream=suite, start=False):
        run = runs.get_run(rid)
        arm, rep = run["config"]["arm"], run["config"]["replicate"]
        score = (0.80 if arm == "sop" else 0.50) + 0.01 * rep
        downstream = {"accuracy": 0.30 + 0.01 * rep, "correct": [1, 0, 1] * 10}
        if run["config"].get("control"):
            downstream |= {"random_accuracy": 0.10 + 0.01 * rep, "random_correct": [0, 0, 1] * 10}
        close(rid, {"sop_accuracy": score, "downstream": {"supersense": downstream}, "held_out_loss": 6.0,
                    "pos_probe_accuracy": 0.6 + 0.01 * rep, "pos_probe_random_init": 0.3,
                    "probes": [{"probe": "the [MASK] of a plant", "top": ["part", "seed", "root", "leaf", "stem"]}]})
    experiments.settle(names["albert"])
    for rid in lab.submit("scaling", tiny, names["scaling"], seeds=2, widths=(16, 32, 64), start=False):
        run = runs.get_run(rid)
        n = lab.size(TrainConfig.from_stored(run["config"])).non_embedding
        close(rid, {"held_out_loss": 40.0 * n ** -0.08 * (1 + 0.002 * run["config"]["replicate"])}, tokens=10**6)
    experiments.settle(names["scaling"])
    bundled = registry.bundled_id()
    configs = [FineTuneConfig(model=bundled, task="wic", mode=mode, seed=seed, epochs=1, max_train=40, max_test=30,
                              run=run_label(names["finetune"], bundled, mode, seed))
               for mode in ("finetune", "frozen") for seed in (0, 1)]
    for cfg, rid in zip(configs, lab.submit_finetune(configs, names["finetune"], start=False), strict=True):
        acc = (0.62 if cfg.mode == "finetune" else 0.55) + 0.01 * cfg.seed
        close(rid, {"model": bundled, "task": "wic", "mode": cfg.mode, "seed": cfg.seed, "accuracy": acc,
                    "accuracy_interval": [acc - 0.1, acc + 0.1], "macro_f1": acc - 0.02, "macro_f1_interval": [acc - 0.12, acc + 0.08],
                    "majority_baseline": 0.5, "train_examples": 40, "test_examples": 30, "trainable_parameters": 1000,
                    "epochs": [{"epoch": 1, "train_loss": 0.69, "validation_accuracy": acc}],
                    "layer_change": [{"layer": "embeddings", "weight_change": 0.001, "cka": 0.99},
                                     {"layer": "layer 0", "weight_change": 0.01, "cka": 0.9}],
                    "correct": [1, 0] * 15})
    names["watch"] = seed_trained(tag)
    return names


def seed_trained(tag: str = "seeded") -> str:
    """Checkpoints trained for real in the model folder, as the labs leave them: a tiny masked LM that kept its steps
    (the pre-training lab's run ``<tag>-watch``, finished in the queue, with its probes over training) and a tiny BERT
    fine-tuned on supersense (a classifier for the heads view). A few seconds. Returns the pre-training run's group."""
    from analysis.results_db import runs
    from models.finetune import FineTuneConfig, finetune
    from models.pretrain import TrainConfig, train
    from services import lab

    tiny = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200,
                       run=f"{tag}-watch")
    r = train(tiny)
    (rid,) = lab.submit("single", tiny, f"{tag}-watch", start=False)
    runs.start_run(rid)
    runs.record_curve(rid, r.curve, seconds=r.seconds)
    runs.finish_run(rid, "finished", evaluation=r.evaluation, checkpoint=r.checkpoint, tokens=r.tokens, seconds=r.seconds,
                    parameters=r.parameters)
    finetune(FineTuneConfig(model="bert-base-uncased", task="supersense", epochs=1, max_train=32, max_test=16, max_len=32,
                            run=f"{tag}-classifier"))
    return f"{tag}-watch"
