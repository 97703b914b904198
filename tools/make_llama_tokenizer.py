#!/usr/bin/env python3
"""Builds the Llama/Mistral-style test tokenizer in tests/fixtures/tokenizer/llama/, and small
variant tokenizers in tests/fixtures/tokenizer/variants/ that cover the other pipeline pieces.

A SentencePiece-style BPE as Hugging Face `tokenizers` writes it for Llama 2: byte fallback to
<0x00>..<0xFF> vocabulary entries (ids 3..258 after <unk>, <s>, </s>), the normalizer
Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer, the decoder
Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)], a TemplateProcessing
post-processor that prepends <s>, and a few extra added tokens (special ones, one of them with
lstrip, and an ordinary one). Tokens for runs of 2, 4 and 8 spaces are merged last. Merges are learned from text shipped with the project (the held-out
Python prompts of models/gdn-pycode-22m) plus docstrings of the Python standard library and a few
sentences in other scripts; the alphabet is limited so rare characters fall back to bytes.

Variants (vocabularies of about a thousand tokens, trained on the same text):
  metaspace_first   SentencePiece-style BPE with the Metaspace pre-tokenizer (prepend_scheme first,
                    split false) and decoder Sequence[ByteFallback, Metaspace]
  metaspace_always  Metaspace (prepend_scheme always, split true), normalizer Sequence[Strip,
                    Replace(Regex)], an ordinary normalized added token and a single_word one
  bytelevel_split   Llama 3 layout: Split(Regex, Isolated) + ByteLevel(use_regex false),
                    ignore_merges, merges written as "a b" strings, an rstrip special token, a
                    BOS-prepending TemplateProcessing inside a post-processor Sequence
  bytelevel_prefix  Split(Regex, MergedWithPrevious, invert), Split(Regex, Contiguous), Digits,
                    ByteLevel(add_prefix_space), end_of_word_suffix on the model
  whitespace        Whitespace pre-tokenizer, BPE with unk and no decoder (tokens joined by spaces)

    python3 tools/make_llama_tokenizer.py [--out tests/fixtures/tokenizer]
"""
import argparse
import importlib
import json
import os
import sys
import warnings

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors,
                        trainers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MULTILINGUAL = [
    "Le renard brun rapide saute par-dessus le chien paresseux. Où est la bibliothèque ?",
    "Größere Änderungen müssen überprüft werden, bevor sie übernommen werden.",
    "El niño comió una manzana y después se durmió en el sofá.",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "敏捷的棕色狐狸跳过了懒狗。我们今天去图书馆学习。",
    "素早い茶色の狐がのろまな犬を飛び越える。今日はいい天気ですね。",
    "빠른 갈색 여우가 게으른 개를 뛰어넘는다.",
    "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
    "Café, naïve, façade, coöperate, résumé, jalapeño, São Paulo, Zürich.",
]

STDLIB_MODULES = [
    "os", "sys", "json", "re", "collections", "itertools", "functools", "pathlib", "typing",
    "argparse", "logging", "subprocess", "threading", "string", "textwrap", "datetime", "math",
    "random", "statistics", "csv", "shutil", "tempfile", "unittest", "dataclasses", "enum",
]


def corpus():
    lines = []
    with open(os.path.join(ROOT, "models", "gdn-pycode-22m", "eval_prompts.json"), encoding="utf-8") as f:
        for prompt in json.load(f)["prompts"]:
            lines.extend(prompt.splitlines())
    warnings.simplefilter("ignore", DeprecationWarning)
    for name in STDLIB_MODULES:
        module = importlib.import_module(name)
        docs = [module.__doc__ or ""]
        for attr in sorted(dir(module)):
            doc = getattr(getattr(module, attr, None), "__doc__", None)
            if isinstance(doc, str):
                docs.append(doc)
        for doc in docs:
            lines.extend(doc.splitlines())
    for _ in range(20):
        lines.extend(MULTILINGUAL)
    return [line for line in lines if line.strip()]


def build(vocab_size):
    special = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Train on words (as SentencePiece does: merges never cross a word boundary) ...
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=special,
                                  limit_alphabet=160, show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    data = json.loads(tok.to_str())

    # ... then lay the vocabulary out as Llama does: specials, the 256 byte tokens, the rest.
    trained = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for t in special + [f"<0x{b:02X}>" for b in range(256)]:
        vocab[t] = len(vocab)
    for t, _ in trained:
        if t not in vocab:
            vocab[t] = len(vocab)
    # Runs of spaces (code indentation) get their own tokens, merged last, as in Llama.
    merges = data["model"]["merges"]
    for n in (1, 2, 4):
        run = "▁" * n
        vocab.setdefault(run * 2, len(vocab))
        merges.append([run, run])
    data["model"]["vocab"] = vocab
    data["model"]["ignore_merges"] = False
    data["added_tokens"] = [
        {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for t in special
    ]
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    ]}
    data["pre_tokenizer"] = None
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    ]}
    tok = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", vocab["<s>"])])
    tok.add_special_tokens([
        AddedToken("<|im_start|>", special=True, normalized=False),
        AddedToken("<|im_end|>", special=True, normalized=False),
        AddedToken("<mask>", special=True, normalized=False, lstrip=True),
    ])
    tok.add_tokens([AddedToken("[TOOL]", special=False, normalized=False)])
    return tok


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def train(model, pre_tokenizer, vocab_size, special, **trainer_args):
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizer
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=special,
                                  show_progress=False, **trainer_args)
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def with_byte_tokens(tok, special):
    """Vocabulary laid out as specials, <0x00>..<0xFF>, then the trained tokens."""
    data = json.loads(tok.to_str())
    trained = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for t in special + [f"<0x{b:02X}>" for b in range(256)]:
        vocab[t] = len(vocab)
    for t, _ in trained:
        vocab.setdefault(t, len(vocab))
    data["model"]["vocab"] = vocab
    data["added_tokens"] = [
        {"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for t in special]
    return data


def variants():
    out = {}
    special = ["<unk>", "<s>", "</s>"]
    sp_model = lambda: models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True)

    tok = train(sp_model(), pre_tokenizers.Metaspace(prepend_scheme="first", split=True), 1000, special,
                limit_alphabet=120)
    data = with_byte_tokens(tok, special)
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}]}
    tok = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    tok.add_special_tokens([AddedToken("<|eot|>", special=True, normalized=False)])
    out["metaspace_first"] = tok

    tok = train(sp_model(), pre_tokenizers.Metaspace(prepend_scheme="always", split=True), 1000, special,
                limit_alphabet=120)
    data = with_byte_tokens(tok, special)
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    data["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    tok = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    tok.add_tokens([AddedToken("tool call", normalized=True), AddedToken("ok", single_word=True, normalized=True)])
    out["metaspace_always"] = tok

    split_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = train(models.BPE(), split_pre, 1000, ["<|begin_of_text|>", "<|end_of_text|>"],
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = True
    data["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    tok = Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
    bot = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                      special_tokens=[("<|begin_of_text|>", bot)])])
    tok.add_special_tokens([AddedToken("<|fim_prefix|>", special=True, normalized=False, rstrip=True)])
    tok.add_tokens([AddedToken("TODO", single_word=True, normalized=True)])
    out["bytelevel_split"] = tok

    prefix_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("[^\n]+"), behavior="merged_with_previous", invert=True),
        pre_tokenizers.Split(Regex("\\s*[,;]"), behavior="contiguous"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    tok = train(models.BPE(end_of_word_suffix="</w>"), prefix_pre, 1000, ["<|endoftext|>"],
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), end_of_word_suffix="</w>")
    tok.decoder = decoders.ByteLevel()
    out["bytelevel_prefix"] = tok

    tok = train(models.BPE(unk_token="[UNK]"), pre_tokenizers.Whitespace(), 1000, ["[UNK]", "[SEP]"],
                limit_alphabet=200)
    tok.decoder = None
    out["whitespace"] = tok
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tokenizer"))
    ap.add_argument("--vocab-size", type=int, default=4000)
    args = ap.parse_args()
    for name, variant in variants().items():
        folder = os.path.join(args.out, "variants", name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "tokenizer.json")
        variant.save(path)
        if name == "bytelevel_split":  # the older merge format: "a b" strings
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, indent=2)
                f.write("\n")
            variant = Tokenizer.from_file(path)
        print(f"wrote {folder}: {variant.get_vocab_size()} tokens")
    tok = build(args.vocab_size)
    args.out = os.path.join(args.out, "llama")
    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    config = {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": 4096,
        "tokenizer_class": "LlamaTokenizerFast",
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}: {tok.get_vocab_size()} tokens")


if __name__ == "__main__":
    sys.exit(main())
