"""Tiny checkpoints of every loadable architecture, with a tokenizer of the real kind.

``build_all(root)`` writes, under ``root/<catalog id>``, a random-weight model (hidden 32, 2 layers,
4 heads) saved with ``save_pretrained`` (safetensors) next to a tokenizer trained on a few sentences:
WordPiece for BERT/DistilBERT/ELECTRA, byte-level BPE for RoBERTa/GPT-2, SentencePiece Unigram for
ALBERT/XLNet. Pointing ``BFE_MODEL_DIR`` at ``root`` makes ``models.loader`` load them exactly as it
loads real checkpoints. Builds in about two seconds, offline.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

CORPUS = [
    "the cat sat on the mat because it was tired .",
    "the animal did not cross the street because it was too wide .",
    "a boy plays in the snow . a boy is outside .",
    "john visited madagascar yesterday and really loved it .",
    "chickens cackle and ducks quack .",
    "new york is a city . paris is a city too .",
    "the man went to the store to buy a gallon of milk .",
    "penguins are flightless birds .",
]

HIDDEN, LAYERS, HEADS, FFN, POSITIONS = 32, 2, 4, 37, 64

#: catalog id -> (architecture family, the class saved: the one with the most heads)
TINY_MODELS: dict[str, tuple[str, str]] = {
    "bert-base-uncased": ("bert", "BertForPreTraining"),
    "roberta-base": ("roberta", "RobertaForMaskedLM"),
    "distilbert-base-uncased": ("distilbert", "DistilBertForMaskedLM"),
    "albert-base-v2": ("albert", "AlbertForPreTraining"),
    "xlnet-base-cased": ("xlnet", "XLNetLMHeadModel"),
    "google/electra-small-generator": ("electra", "ElectraForMaskedLM"),
    "google/electra-small-discriminator": ("electra", "ElectraForPreTraining"),
    "gpt2": ("gpt2", "GPT2LMHeadModel"),
}


def wordpiece_tokenizer():
    from transformers import BertTokenizer

    words = sorted({w for line in CORPUS for w in line.split()})
    pieces = ["##s", "##ing", "##ed", "##ly", "!", ",", "?", "'"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, *pieces]
    return BertTokenizer(vocab={t: i for i, t in enumerate(vocab)})


def _bpe_vocab(specials: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1, special_tokens=specials, show_progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        bpe.save_model(tmp)
        import json

        vocab = json.loads((Path(tmp) / "vocab.json").read_text())
        merges = [tuple(line.split()) for line in (Path(tmp) / "merges.txt").read_text().splitlines()[1:] if line]
    return vocab, merges


def bpe_tokenizer(kind: str):
    from transformers import GPT2Tokenizer, RobertaTokenizer

    if kind == "roberta":
        vocab, merges = _bpe_vocab(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        return RobertaTokenizer(vocab=vocab, merges=merges)
    vocab, merges = _bpe_vocab(["<|endoftext|>"])
    return GPT2Tokenizer(vocab=vocab, merges=merges)


def _unigram_pieces() -> list[tuple[str, float]]:
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(CORPUS * 10))
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=f"{tmp}/sp", vocab_size=150, model_type="unigram",
            hard_vocab_limit=False, minloglevel=2, pad_id=0, unk_id=1, bos_id=2, eos_id=3)
        sp = spm.SentencePieceProcessor(model_file=f"{tmp}/sp.model")
        return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(4, sp.get_piece_size())]


def unigram_tokenizer(kind: str):
    from transformers import AlbertTokenizer, XLNetTokenizer

    pieces = _unigram_pieces()
    if kind == "albert":
        specials = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
        return AlbertTokenizer(vocab=[(s, 0.0) for s in specials] + pieces)
    specials = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]
    return XLNetTokenizer(vocab=[(s, 0.0) for s in specials] + pieces)


def tiny_tokenizer(arch: str):
    if arch in ("bert", "distilbert", "electra"):
        return wordpiece_tokenizer()
    if arch in ("roberta", "gpt2"):
        return bpe_tokenizer(arch)
    return unigram_tokenizer(arch)


def tiny_config(arch: str, tokenizer):
    from transformers import AutoConfig

    vocab = len(tokenizer)
    common = {"vocab_size": vocab, "pad_token_id": tokenizer.pad_token_id}
    if arch == "distilbert":
        kw = {"dim": HIDDEN, "n_layers": LAYERS, "n_heads": HEADS, "hidden_dim": FFN, "max_position_embeddings": POSITIONS}
    elif arch == "xlnet":
        kw = {"d_model": HIDDEN, "n_layer": LAYERS, "n_head": HEADS, "d_inner": FFN,
              "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    elif arch == "gpt2":
        kw = {"n_embd": HIDDEN, "n_layer": LAYERS, "n_head": HEADS, "n_positions": POSITIONS,
              "bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id}
        common["pad_token_id"] = None
    else:
        kw = {"hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "intermediate_size": FFN, "max_position_embeddings": POSITIONS}
        if arch in ("albert", "electra"):
            kw["embedding_size"] = 16
        if arch == "roberta":
            kw.update(max_position_embeddings=POSITIONS + 2, type_vocab_size=1,
                      bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return AutoConfig.for_model(arch, **common, **kw)


def build(folder: Path, arch: str, class_name: str, seed: int = 0) -> Path:
    """Write one tiny checkpoint (model + tokenizer) to ``folder``."""
    import torch
    import transformers

    torch.manual_seed(seed)
    tokenizer = tiny_tokenizer(arch)
    tokenizer.model_max_length = POSITIONS
    model = getattr(transformers, class_name)(tiny_config(arch, tokenizer))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_all(root: Path) -> dict[str, Path]:
    """Write every tiny checkpoint under ``root``; return catalog id -> folder."""
    return {mid: build(Path(root) / mid, arch, cls) for mid, (arch, cls) in TINY_MODELS.items()}


if __name__ == "__main__":
    import sys

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-models")
    for mid, folder in build_all(out).items():
        print(mid, folder)
