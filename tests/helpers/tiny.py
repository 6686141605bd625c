"""Tiny checkpoints of every loadable architecture, with a tokenizer of the real kind.

``build_all(root)`` writes, under ``root/<catalog id>``, a random-weight model (hidden 32, 2 layers,
4 heads) saved with ``save_pretrained`` (safetensors) next to a tokenizer trained on a few sentences:
WordPiece for BERT/DistilBERT/ELECTRA/MPNet (and a cased multilingual one for mBERT), byte-level BPE
for RoBERTa/GPT-2/ModernBERT, SentencePiece Unigram for ALBERT/XLNet/XLM-R/DeBERTa-v3. Pointing
``BFE_MODEL_DIR`` at ``root`` makes ``models.loader`` load them exactly as it loads real checkpoints.
Builds in about four seconds, offline.
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
    # the successors, each with a tokenizer of its real kind
    "bert-base-multilingual-cased": ("mbert", "BertForPreTraining"),
    "xlm-roberta-base": ("xlm-roberta", "XLMRobertaForMaskedLM"),
    "mpnet-base": ("mpnet", "MPNetForMaskedLM"),
    "deberta-v3-base": ("deberta-v2", "DebertaV2Model"),  # the real checkpoint is a discriminator: no MLM head
    "modernbert-base": ("modernbert", "ModernBertForMaskedLM"),
}

#: ModernBERT's tiny sliding window (the real one is 128 tokens): small enough that a test sentence shows the band.
LOCAL_ATTENTION = 4


#: Words in other scripts for the multilingual tokenizers (mBERT splits CJK into characters).
MULTILINGUAL = ["die", "katze", "schläft", "le", "chat", "dort", "猫", "が", "寝", "る", "кошка", "спит"]


def _wordpiece_vocab(cased: bool = False) -> list[str]:
    words = sorted({w for line in CORPUS for w in line.split()} | ({w.capitalize() for line in CORPUS for w in line.split()}
                                                                   | set(MULTILINGUAL) if cased else set()))
    return [*words, "##s", "##ing", "##ed", "##ly", "!", ",", "?", "'"]


def wordpiece_tokenizer(cased: bool = False):
    from transformers import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_wordpiece_vocab(cased)]
    return BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=not cased,
                         **({"tokenize_chinese_chars": True, "strip_accents": False} if cased else {}))


def mpnet_tokenizer():
    """MPNet's WordPiece with RoBERTa-style special tokens (<s>, </s>, <mask>), as microsoft/mpnet-base has."""
    from transformers import MPNetTokenizer

    vocab = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", *_wordpiece_vocab(), "<mask>"]
    return MPNetTokenizer(vocab={t: i for i, t in enumerate(vocab)})


def modernbert_tokenizer():
    """ModernBERT's kind: a byte-level BPE (tokenizers) with BERT's special tokens, [CLS] x [SEP]."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                   pad_token="[PAD]", mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"])


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
    from transformers import AlbertTokenizer, DebertaV2Tokenizer, XLMRobertaTokenizer, XLNetTokenizer

    pieces = _unigram_pieces()
    if kind == "albert":
        specials = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
        return AlbertTokenizer(vocab=[(s, 0.0) for s in specials] + pieces)
    if kind == "deberta-v2":
        specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
        return DebertaV2Tokenizer(vocab=[(s, 0.0) for s in specials] + pieces)
    if kind == "xlm-roberta":
        specials = ["<s>", "<pad>", "</s>", "<unk>"]
        pieces += [(w, -5.0) for w in MULTILINGUAL]
        return XLMRobertaTokenizer(vocab=[(s, 0.0) for s in specials] + pieces + [("<mask>", 0.0)])
    specials = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]
    return XLNetTokenizer(vocab=[(s, 0.0) for s in specials] + pieces)


def tiny_tokenizer(arch: str):
    if arch in ("bert", "distilbert", "electra"):
        return wordpiece_tokenizer()
    if arch == "mbert":
        return wordpiece_tokenizer(cased=True)
    if arch == "mpnet":
        return mpnet_tokenizer()
    if arch == "modernbert":
        return modernbert_tokenizer()
    if arch in ("roberta", "gpt2"):
        return bpe_tokenizer(arch)
    return unigram_tokenizer(arch)


def tiny_config(arch: str, tokenizer):
    from transformers import AutoConfig

    vocab = len(tokenizer)
    common = {"vocab_size": vocab, "pad_token_id": tokenizer.pad_token_id}
    arch = "bert" if arch == "mbert" else arch
    if arch == "deberta-v2":  # DeBERTa-v3's switches: relative positions only, shared keys, both directions
        kw = {"hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "intermediate_size": FFN,
              "max_position_embeddings": POSITIONS, "relative_attention": True, "position_buckets": 16,
              "norm_rel_ebd": "layer_norm", "share_att_key": True, "pos_att_type": "p2c|c2p", "max_relative_positions": -1,
              "position_biased_input": False, "type_vocab_size": 0}
        return AutoConfig.for_model(arch, **common, **kw)
    if arch == "modernbert":  # three layers: global, local, local
        kw = {"hidden_size": HIDDEN, "num_hidden_layers": 3, "num_attention_heads": HEADS, "intermediate_size": FFN,
              "max_position_embeddings": POSITIONS, "local_attention": LOCAL_ATTENTION, "global_attn_every_n_layers": 3,
              "cls_token_id": tokenizer.cls_token_id, "sep_token_id": tokenizer.sep_token_id,
              "bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id}
        return AutoConfig.for_model(arch, **common, **kw)
    if arch == "mpnet":
        kw = {"hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "intermediate_size": FFN,
              "max_position_embeddings": POSITIONS + 2, "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
        return AutoConfig.for_model(arch, **common, **kw)
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
        if arch in ("roberta", "xlm-roberta"):
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
