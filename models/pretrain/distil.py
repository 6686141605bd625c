"""Knowledge distillation as DistilBERT does it (Sanh et al. 2019): a student with half the teacher's layers,
initialised from the teacher's embeddings and every other layer (0, 2, 4, …), trained on

    L = α_ce · KL(softmax(t/T) ‖ softmax(s/T)) · T²  +  α_mlm · masked-LM cross-entropy  +  α_cos · (1 − cos(h_s, h_t))

with the weights and temperature of Hugging Face's distillation example (``examples/research_projects/distillation``,
``distiller.py`` and its README's training command: α_ce 5.0, α_mlm 2.0, α_cos 1.0, T 2.0). As there, the soft
targets are read at the masked positions only (where the masked LM predicts), and the cosine loss over the last
hidden states of every real token of the masked-LM's input.

The teacher is any masked-LM checkpoint of the BERT architecture with the student's vocabulary, width, heads and
feed-forward width: a lab run (``trained/<run>``) or ``bert-base-uncased`` where the Hub is reachable, loaded through
:func:`models.loader.load` (its id rules, its checks of the checkpoint). It runs in eval mode, without gradients.

Also here: :func:`inference_timing`, the student's and the teacher's forward time per batch, measured in the same
process on the same batches (the paper's Table 3 speed-up, in miniature).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig

#: Hugging Face's distillation example (README's DistilBERT command): loss weights and the softmax temperature.
ALPHA_CE, ALPHA_MLM, ALPHA_COS, TEMPERATURE = 5.0, 2.0, 1.0, 2.0
_TEACHER = "distil_teacher"  # the student's attribute holding its teacher (see attach_teacher)


def student_layers(teacher_layers: int) -> int:
    """The layers a student keeps: every other one of the teacher's, starting with the first (12 → 6, 2 → 1, 3 → 2)."""
    return (teacher_layers + 1) // 2


def load_teacher(config: TrainConfig) -> Any:
    """The teacher's masked LM, in eval mode on the CPU in fp32, through the loader's rules (id, safetensors,
    heads). A cache of its own: the training loop moves it to its device, which must not move the process-wide
    cache's copy that the pages share.

    Raises:
        InvalidModelId, ModelUnavailable, UnsupportedTask (no masked-LM head): from :func:`models.loader.load`.
    """
    from models.cache import ModelCache
    from models.loader import load

    loaded = load(config.teacher, "masked-lm", device="cpu", cache=ModelCache(2**40))
    model = loaded.model.float().eval()
    model.requires_grad_(False)
    return model, loaded.tokenizer


def check_teacher(config: TrainConfig, teacher: Any, teacher_tok: Any, tok: Any) -> None:
    """Refuse a teacher the student cannot be cut from: another architecture, vocabulary, width, heads or FFN, or a
    depth whose every other layer is not the student's depth.

    Raises:
        InvalidConfig: with what differs.
    """
    cfg = teacher.config
    if cfg.model_type != "bert" or not (hasattr(teacher, "bert") and hasattr(teacher, "cls")):
        raise InvalidConfig(f"The teacher {config.teacher} is a {cfg.model_type} model; distillation here cuts a BERT "
                            "student from a BERT masked LM.", "Use a lab masked-LM run (trained/<run>) or bert-base-uncased.")
    if teacher_tok.get_vocab() != tok.get_vocab():
        raise InvalidConfig(f"The teacher {config.teacher} has another vocabulary than the run's ({config.vocab}).",
                            "Pick the vocabulary the teacher was trained with (bert for bert-base-uncased).")
    shape = {"hidden": cfg.hidden_size, "heads": cfg.num_attention_heads, "ffn": cfg.intermediate_size}
    wrong = {k: v for k, v in shape.items() if getattr(config, k) != v}
    if wrong:
        raise InvalidConfig(f"The student must have its teacher's shape; the teacher has {wrong}.",
                            "Set the run's hidden size, heads and FFN to the teacher's.")
    if config.layers != student_layers(cfg.num_hidden_layers):
        raise InvalidConfig(f"The teacher has {cfg.num_hidden_layers} layers: its student keeps every other one, "
                            f"{student_layers(cfg.num_hidden_layers)}, not {config.layers}.",
                            f"Set layers to {student_layers(cfg.num_hidden_layers)}.")


def init_from_teacher(student: Any, teacher: Any) -> None:
    """Copy the teacher's embeddings, every other layer (0, 2, 4, …) and its MLM head into the student, as Hugging
    Face's ``scripts/extract_distilbert.py`` does for DistilBERT (there from bert-base's layers 0, 2, 4, 7, 9, 11)."""
    t = teacher.state_dict()
    state = {}
    for key in student.state_dict():
        if key.startswith("bert.encoder.layer."):
            i, rest = key[len("bert.encoder.layer."):].split(".", 1)
            state[key] = t[f"bert.encoder.layer.{2 * int(i)}.{rest}"]
        elif key in t:
            state[key] = t[key]
    student.load_state_dict(state, strict=False)  # the pooler, absent from a masked LM, stays as built


def attach_teacher(student: Any, teacher: Any) -> None:
    """Hang the teacher on the student outside torch's module registry (the instance dict, not ``add_module``): so
    the optimiser never sees its weights, ``save_pretrained`` and ``state_dict`` leave it out, and the training loop
    (written for one model per objective) carries it without change."""
    student.__dict__[_TEACHER] = teacher


def teacher_of(student: Any) -> Any:
    """The teacher :func:`attach_teacher` hung on ``student``, on the student's device.

    Raises:
        InvalidConfig: the student has none (a model wrapped for several processes: distillation runs in one).
    """
    teacher = student.__dict__.get(_TEACHER)
    if teacher is None:
        raise InvalidConfig("Distillation runs in one process (its teacher is not shared across processes).",
                            "Run it without accelerate launch / torchrun.")
    device = student.bert.embeddings.word_embeddings.weight.device
    if teacher.bert.embeddings.word_embeddings.weight.device != device:
        teacher.to(device)
    return teacher


def soft_target_loss(student_logits: Any, teacher_logits: Any, temperature: float = TEMPERATURE) -> Any:
    """KL(softmax(t/T) ‖ softmax(s/T)) averaged over the positions, × T² (Hinton et al. 2015: keeps the soft targets'
    gradients at the hard loss's scale as T changes). ``*_logits``: (N, V), N masked positions."""
    return F.kl_div(F.log_softmax(student_logits / temperature, dim=-1), F.softmax(teacher_logits / temperature, dim=-1),
                    reduction="batchmean") * temperature**2


def distil_losses(student: Any, batch: dict[str, Any]) -> dict[str, Any]:
    """The three parts of the distillation loss on a masked-LM batch and their weighted sum (``loss``)."""
    teacher = teacher_of(student)
    masked = batch["labels"] != -100  # (B, T)
    real = batch["attention_mask"].bool()  # (B, T)
    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    with torch.no_grad():
        t_hidden = teacher.bert(**kwargs).last_hidden_state  # (B, T, h)
        t_logits = teacher.cls(t_hidden[masked])  # (N, V)
    s_hidden = student.bert(**kwargs).last_hidden_state  # (B, T, h)
    s_logits = student.cls(s_hidden[masked])  # (N, V): the head only where the losses read it
    ce = soft_target_loss(s_logits.float(), t_logits.float())
    mlm = F.cross_entropy(s_logits.float(), batch["labels"][masked])
    s_real, t_real = s_hidden[real].float(), t_hidden[real].float()  # (R, h)
    cos = F.cosine_embedding_loss(s_real, t_real, s_real.new_ones(len(s_real)))
    return {"ce": ce, "mlm": mlm, "cos": cos, "loss": ALPHA_CE * ce + ALPHA_MLM * mlm + ALPHA_COS * cos}


def build_student(config: TrainConfig, make: Any, tok: Any) -> Any:
    """The student (``make()``: the run's BERT masked LM, built as any lab model), cut from the teacher and carrying it."""
    teacher, teacher_tok = load_teacher(config)
    check_teacher(config, teacher, teacher_tok, tok)
    student = make()
    init_from_teacher(student, teacher)
    attach_teacher(student, teacher)
    return student


def inference_timing(student: Any, batch: dict[str, Any], repeats: int = 7, inner: int = 3) -> dict[str, Any]:
    """The encoder's forward time on one batch for the student and its teacher, in seconds per forward: ``repeats``
    timings of ``inner`` forwards each, the two models interleaved after a warm-up so that both see the same machine
    load. ``speedup`` is the teacher's fastest over the student's fastest (the minimum, as ``timeit`` advises: on a
    shared machine the slower repeats measure the other processes). The encoders only: fine-tuned, both would drop
    the MLM head."""
    teacher = teacher_of(student)
    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    cuda = batch["input_ids"].is_cuda

    def timed(model: torch.nn.Module) -> float:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(inner):
            model.bert(**kwargs)
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / inner

    with torch.no_grad():
        timed(student), timed(teacher)  # warm-up: first calls allocate
        rows = [(timed(student), timed(teacher)) for _ in range(repeats)]
    fastest_student, fastest_teacher = min(s for s, _ in rows), min(t for _, t in rows)
    return {"student_seconds": [s for s, _ in rows], "teacher_seconds": [t for _, t in rows],
            "speedup": fastest_teacher / fastest_student if fastest_student > 0 else float("nan"),
            "batch": int(batch["input_ids"].shape[0])}


def held_out_parts(student: Any, batches: list[dict[str, Any]]) -> dict[str, Any]:
    """What a distilled run's evaluation adds: the loss's parts on held-out batches (the masked LM's perplexity
    among them, comparable with a masked LM's) and :func:`inference_timing` on the first batch."""
    with torch.no_grad():
        parts = [distil_losses(student, b) for b in batches]
    mean = {k: sum(float(p[k]) for p in parts) / len(parts) for k in ("ce", "mlm", "cos")}
    return {"distil_soft_target_loss": mean["ce"], "distil_mlm_loss": mean["mlm"], "distil_cosine_loss": mean["cos"],
            "perplexity": math.exp(min(mean["mlm"], 50)), "inference": inference_timing(student, batches[0])}
