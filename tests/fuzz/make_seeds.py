#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets under tests/fuzz/corpus/<target>/: real inputs taken
from the fixtures, small valid inputs made here, and a few edge cases. Run from anywhere; the
output is deterministic, so re-running it changes nothing unless this script changed."""
import json
import pathlib
import random
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = HERE / "corpus"


def write(target, name, data):
    path = CORPUS / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


# ---- safetensors: whole files ---------------------------------------------------------------
def safetensors(tensors, metadata=None, pad_header=True):
    """tensors: name -> (dtype, shape, raw bytes); offsets assigned in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad_header:  # the format pads the header with spaces to a multiple of 8
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def real_header(path):
    """The header of a fixture file, with its data section cut off (the seed stays small; the
    reader refuses it, but the mutations of its real names and shapes are what matter)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return raw[: 8 + n]


def safetensors_seeds():
    write("safetensors", "gdn_tiny_a_header", real_header(FIXTURES / "gdn_tiny_a" / "model.safetensors"))
    write("safetensors", "expected_header", real_header(FIXTURES / "gdn_tiny_a" / "expected.safetensors"))
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, float("inf"))
    write("safetensors", "small_mixed", safetensors({
        "w.f32": ("F32", [2, 2], f32),
        "w.bf16": ("BF16", [3], struct.pack("<3H", 0x3F80, 0xC000, 0x7FC0)),
        "w.f16": ("F16", [1, 2], struct.pack("<2H", 0x3C00, 0x0001)),
        "ids.i64": ("I64", [2], struct.pack("<2q", 1, -1)),
        "ids.i32": ("I32", [1], struct.pack("<i", 7)),
        "mask.u8": ("U8", [3], b"\x00\x01\x02"),
    }, metadata={"format": "pt"}))
    write("safetensors", "scalar_and_empty", safetensors({
        "scalar": ("F32", [], struct.pack("<f", 3.0)),
        "empty": ("F16", [0, 4], b""),
        "f8": ("F8_E4M3", [2], b"\x38\xb8"),
    }))
    write("safetensors", "only_metadata", safetensors({}, metadata={"k": "v"}))
    write("safetensors", "header_unpadded", safetensors({"x": ("F32", [1], f32[:4])}, pad_header=False))
    # Edge cases: overlapping ranges, offsets past the end, a header length past the file.
    overlap = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}'
    write("safetensors", "overlap", struct.pack("<Q", len(overlap)) + overlap + b"\0" * 8)
    past = b'{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}'
    write("safetensors", "offsets_past_end", struct.pack("<Q", len(past)) + past + b"\0" * 4)
    write("safetensors", "length_past_file", struct.pack("<Q", 1 << 40) + b"{}")


# ---- config.json ----------------------------------------------------------------------------
def config_seeds():
    for name in ("gdn_tiny_a", "gdn_tiny_b"):
        write("config", name, (FIXTURES / name / "config.json").read_bytes())
    shipped = ROOT / "models" / "gdn-pycode-22m" / "config.json"
    if shipped.exists():
        write("config", "gdn_pycode_22m", shipped.read_bytes())
    base = json.loads((FIXTURES / "gdn_tiny_a" / "config.json").read_text())
    minimal = {k: base[k] for k in ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_heads", "head_dim")}
    write("config", "minimal", json.dumps(minimal))
    write("config", "explicit_sizes", json.dumps(dict(minimal, num_v_heads=4, intermediate_size=384, expand_v=1.5,
                                                       use_short_conv=False, bos_token_id=[1, 5], eos_token_id=2,
                                                       hidden_ratio=2.5, norm_eps=1e-5)))
    write("config", "float_integers", json.dumps(dict(minimal, hidden_size=128.0, conv_size=4.0, tie_word_embeddings=True)))
    write("config", "large_sizes", json.dumps(dict(minimal, num_heads=65536, head_dim=65536, vocab_size=2147483647)))
    write("config", "wrong_type", '{"model_type": "llama", "vocab_size": 10}')


# ---- tokenizer.json + NUL + flags byte + text -----------------------------------------------
SAMPLE = "Hello world!  def f(x):\n\treturn x*2 # 12345 \u00e9t\u00e9 \u2581 \U0001F600 <s>hi</s>"


def tokenizer_input(tok, text=SAMPLE, flags=2):
    body = tok if isinstance(tok, bytes) else json.dumps(tok, ensure_ascii=False).encode()
    return body + b"\0" + bytes([flags]) + text.encode()


def byte_level_vocab():
    # GPT-2's byte-to-unicode table: printable bytes map to themselves, the others above U+0100.
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return {chars[b]: i for i, b in enumerate(range(256))}, chars


def tiny_byte_level(pre_tokenizer, normalizer=None):
    vocab, chars = byte_level_vocab()
    merges = []
    for a, b in (("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (chars[32], "w"), ("o", "r")):
        vocab.setdefault(a + b, len(vocab))
        merges.append(f"{a} {b}")
    return {
        "version": "1.0",
        "added_tokens": [{"id": len(vocab), "content": "<s>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True},
                         {"id": len(vocab) + 1, "content": "</s>", "single_word": False, "lstrip": True,
                          "rstrip": True, "normalized": False, "special": True}],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [len(vocab)], "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def tiny_sentencepiece():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece in ("\u2581", "h", "e", "l", "o", "w", "r", "d", "\u2581h", "ll", "\u2581he", "\u2581hell", "\u2581hello"):
        vocab[piece] = len(vocab)
    merges = [["\u2581", "h"], ["l", "l"], ["\u2581h", "e"], ["\u2581he", "ll"], ["\u2581hell", "o"]]
    return {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for c, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                          {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True, "vocab": vocab, "merges": merges},
    }


def tokenizer_seeds():
    split_regex = {"type": "Split", "pattern": {"Regex": r"'s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"},
                   "behavior": "Isolated", "invert": False}
    write("tokenizer", "byte_level_split", tokenizer_input(tiny_byte_level(
        {"type": "Sequence", "pretokenizers": [split_regex, {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})))
    write("tokenizer", "byte_level_regex", tokenizer_input(tiny_byte_level(
        {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}), flags=1 | 2))
    write("tokenizer", "digits_whitespace", tokenizer_input(tiny_byte_level(
        {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, {"type": "Whitespace"},
                                               {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        normalizer={"type": "Strip", "strip_left": True, "strip_right": True}), flags=4))
    write("tokenizer", "char_delimiter", tokenizer_input(tiny_byte_level(
        {"type": "Sequence", "pretokenizers": [{"type": "CharDelimiterSplit", "delimiter": "o"}, {"type": "WhitespaceSplit"},
                                               {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        normalizer={"type": "ByteLevel"})))
    write("tokenizer", "metaspace", tokenizer_input(dict(tiny_sentencepiece(), normalizer=None, pre_tokenizer={
        "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}, decoder={
        "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True})))
    write("tokenizer", "sentencepiece_fallback", tokenizer_input(tiny_sentencepiece(), flags=1 | 2 | 4))
    # A regex whose matches end inside a character when "." becomes "\\C" (a dictionary entry): the
    # pieces that follow then start mid-character, which every later stage must survive.
    long_words = "abcdefghijklmnopqrstuvwxyz\u20ac 0123456789abcdefghijklmnop\U0001F600 x\u00e9"
    write("tokenizer", "split_long_pieces", tokenizer_input(dict(tiny_sentencepiece(), normalizer=None, pre_tokenizer={
        "type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "[a-z0-9]+."}, "behavior": "Isolated",
                                               "invert": False}, {"type": "Whitespace"}, {"type": "Digits"}]}), text=long_words))
    # A real tokenizer of the fixtures, unchanged.
    real = (FIXTURES / "tokenizer" / "variants" / "bytelevel_split" / "tokenizer.json").read_bytes()
    write("tokenizer", "fixture_bytelevel_split", tokenizer_input(real))
    # Edge cases: text that is not UTF-8, an empty text, a tokenizer without NUL (sample text).
    write("tokenizer", "invalid_utf8_text", tokenizer_input(tiny_sentencepiece(), text="") + b"ab\xc3(\xff\xfe")
    write("tokenizer", "empty_text", tokenizer_input(tiny_sentencepiece(), text=""))
    write("tokenizer", "json_only", json.dumps(tiny_sentencepiece()))


# ---- verify_tree: bytes for FuzzedDataProvider ----------------------------------------------
def verify_tree_seeds():
    rng = random.Random(21)
    write("verify_tree", "zeros", bytes(64))
    write("verify_tree", "ones", b"\xff" * 64)
    for i in range(4):
        write("verify_tree", f"random_{i}", bytes(rng.randrange(256) for _ in range(64 + 96 * i)))


if __name__ == "__main__":
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    verify_tree_seeds()
