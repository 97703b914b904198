#!/usr/bin/env python3
"""Writes the golden files the tokenizer tests compare against (tests/api/test_tokenizer.cpp).

The corpus (deterministic, fixed seed) mixes Python source, whitespace runs, accents, CJK, emoji
and ZWJ sequences, control and unusual code points (including strings that look like byte-level
encodings), characters rare enough to need byte fallback, long repeats and every added token in
several contexts. For each tokenizer the reference Hugging Face `tokenizers` library encodes every
string with and without matching special tokens, and decodes the ids with and without skipping
special tokens; it also decodes arbitrary id sequences (mostly byte tokens, so that invalid
UTF-8 and its U+FFFD replacement are covered).

    python3 tools/gen_tokenizer_golden.py [--out tests/fixtures/tokenizer]

Output: corpus.json (the strings) and golden_<name>.json per tokenizer:
    {"tokenizer": <folder relative to the repository>, "tokenizers_version": ...,
     "bos_prepend": <id or null>,    # encode(add_special_tokens=True) == [bos_prepend] + ids
     "random_decodes": [{"ids": [...], "text": ..., "text_skip": ...}],  # arbitrary id sequences,
                                     # mostly byte tokens: invalid UTF-8 -> U+FFFD; text_skip
                                     # omitted when equal to text
     "cases": [{"ids": [...],          # parse special tokens
                "ids_plain": [...],    # special tokens as text; omitted when equal to ids
                "text": "...",         # decode(ids, skip_special=False); omitted when equal
                                       # to the corpus string
                "text_skip": "...",    # decode(ids, skip_special=True); omitted when equal to text
                "text_plain": "..."}]} # decode(ids_plain); omitted when equal to text
The i-th case belongs to the i-th corpus string. The variant tokenizers (tests/fixtures/tokenizer/
variants/, made by tools/make_llama_tokenizer.py) skip strings longer than 300 characters to keep
the files small: their case is null.
"""
import argparse
import json
import os
import random
import sys
import zlib

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20240611

# name -> tokenizer folder, relative to the repository root
TOKENIZERS = {
    "gdn": "models/gdn-pycode-22m",
    "llama": "tests/fixtures/tokenizer/llama",
}
VARIANT_DIR = "tests/fixtures/tokenizer/variants"

WORDS = ("the of and to in is that for it as with was on be by this are from or have an not "
         "function return value self import class def None True False print len range list dict "
         "error result data file path name type string number index count").split()

WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ",
              "\u00a0", "\u3000", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\u200b", "\u2009",
              "\u202f", "\u205f", "\u1680", "\u180e", "\ufeff"]

ACCENTED = ["café", "naïve", "façade", "coöperate", "résumé", "jalapeño", "São Paulo", "Zürich",
            "Ærøskøbing", "Łódź", "İstanbul", "ß", "ẞ", "ǅ", "ﬁ", "Å", "Å", "e\u0301",
            "a\u0308\u0301", "n\u0303", "o\u0328\u0304", "Ελληνικά", "Москва", "ქართული", "Հայերեն",
            "עברית", "العربية", "हिन्दी", "বাংলা", "ไทย", "ພາສາລາວ", "தமிழ்", "Tiếng Việt"]

CJK = ["敏捷的棕色狐狸", "我们今天去图书馆学习。", "素早い茶色の狐", "今日はいい天気ですね", "カタカナ",
       "ひらがな", "빠른 갈색 여우", "한국어 문장입니다", "中文，标点！", "「引用」『二重』", "𠀀𠀁𪜀",
       "龘靐齉", "㐀㐁", "漢字かな交じり文", "全角ＡＢＣ１２３"]

EMOJI = ["🦊", "😀😃😄", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵🇫🇷", "❤️", "☺︎", "🧑🏿‍🚀", "👩‍❤️‍💋‍👨",
         "🫠", "🪿", "#️⃣", "1️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "✨🎉", "🐍 python"]

ODD = ["Ġ", "Ċ", "ĠĠ", "Ġthe", "ĉ", "Ā", "ā", "Ń", "ł", "Âł", "âĢĻ", "ðŁĺĢ", "<0x41>", "<0xE2>",
       "▁", "▁▁", "▁hello", "\x00", "\x01\x02\x03", "\x1b[31mred\x1b[0m", "\x7f", "\u0080",
       "\u009f", "\ufffd", "\ufffe", "\uffff", "\U0010ffff", "\U000e0001", "\ue000", "\U000f0000",
       "\u200d", "\u200c", "\u2060", "\u00ad", "\u034f", "\u0300", "\u20dd", "\U0001d54a\U0001d560",
       "\U0001f600", "\u1c89", "\ua7cb", "\U000105c0", "\U0002ebf0", "\U00031350", "\u0897",
       "\u00b2\u00b3\u00b9", "\u00bd\u2153", "\u2167\u216b", "\u0660\u0661\u0662", "\u09f4",
       "\uff10\uff11", "\U0001d7ce", "'s", "'S", "''s", "'re'", "'ll've", "''", "'", "don't",
       "I'M", "it’s", "a'b'c", "'\u00e9"]

NUMBERS = ["0", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000", "1e-10",
           "0x1F", "v1.2.3", "2024-06-11", "12:30:45", "-42", "+7", "١٢٣", "१२३", "①②③", "x²+y²"]

PUNCT = ["!", "?", "...", "…", "—", "–", "«»", "“quoted”", "‘single’", "()", "[]{}", "<>", "@#$%^&*",
         "~`|\\", "->", "=>", "::", "!=", "==", "**kwargs", "/* */", "// c", "# py", "¿Qué?", "¡Hola!"]

LONG = ["a" * 1000, " " * 500, "\n" * 300, "=" * 800, "ab" * 500, "🙂" * 100, "\t" * 64,
        "x " * 400, "-" * 2000, "é" * 300, "字" * 400, "\u00a0" * 100, "    " * 50 + "pass",
        " " * 1000 + "x", "0" * 600, "'s" * 200, "\r\n" * 200, "ab1 " * 250, "<" * 300 + ">" * 300,
        "".join(chr(c) for c in range(0x20, 0x7f)) * 8]


def python_snippets(rng):
    with open(os.path.join(ROOT, "models", "gdn-pycode-22m", "eval_prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)["prompts"]
    lines = [l for p in prompts for l in p.splitlines()]
    out = []
    out.extend(rng.sample(lines, 500))
    for _ in range(200):  # multi-line snippets keep indentation and blank lines
        p = rng.choice(prompts).splitlines(keepends=True)
        i = rng.randrange(len(p))
        out.append("".join(p[i:i + rng.randint(2, 12)]))
    for p in prompts[:10]:
        out.append(p)  # whole prompts (several KB each)
    return out


def whitespace_strings(rng):
    out = []
    for ws in WHITESPACE:
        out.extend([ws, "a" + ws + "b", ws + "word", "word" + ws, ws * 3 + "x" + ws * 2,
                    "1" + ws + "2", "." + ws + "!"])
    for _ in range(120):
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append(rng.choice(WHITESPACE) * rng.randint(1, 4))
            if rng.random() < 0.6:
                parts.append(rng.choice(WORDS + PUNCT + NUMBERS))
        out.append("".join(parts))
    return out


def rare_chars(rng):
    """Code points from many blocks: most are missing from the test vocabularies (byte fallback)."""
    blocks = [(0x00A0, 0x024F), (0x0370, 0x052F), (0x0590, 0x06FF), (0x0900, 0x0DFF), (0x0E00, 0x0EFF),
              (0x1000, 0x109F), (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x2BFF),
              (0x2E80, 0x2FDF), (0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xA4CF),
              (0xAC00, 0xD7A3), (0xE000, 0xF8FF), (0xF900, 0xFAFF), (0xFB00, 0xFFFD),
              (0x10000, 0x1007F), (0x1D400, 0x1D7FF), (0x1F300, 0x1FAFF), (0x20000, 0x2A6DF),
              (0x2EBF0, 0x2EE5D), (0x30000, 0x3134A), (0xE0000, 0xE007F), (0xF0000, 0xF00FF)]
    out = []
    for _ in range(300):
        n = rng.randint(1, 6)
        chars = []
        for _ in range(n):
            lo, hi = rng.choice(blocks)
            chars.append(chr(rng.randint(lo, hi)))
        sep = rng.choice(["", " ", "", "x", "\n"])
        out.append(sep.join(chars))
    return out


def special_strings(rng, specials):
    out = []
    for t in specials:
        out.extend([t, t + t, "a" + t + "b", " " + t + " ", "  " + t + "  ", "\n" + t + "\n", t + "hello",
                    "hello" + t, "x " + t + " y", t[:-1], t[1:], t[:-1] + t, "<" + t + ">",
                    "def f():" + t + "\n    pass", t.upper(), t + " " + t, "word  " + t])
    for _ in range(80):
        parts = []
        for _ in range(rng.randint(2, 7)):
            parts.append(rng.choice(specials) if rng.random() < 0.4 else rng.choice(WORDS + WHITESPACE + PUNCT))
        out.append(rng.choice(["", " "]).join(parts))
    return out


def mixtures(rng, pools):
    out = []
    flat = [s for pool in pools for s in pool if len(s) < 200]
    for _ in range(500):
        parts = [rng.choice(flat) for _ in range(rng.randint(2, 8))]
        out.append(rng.choice(["", " ", "\n", "  "]).join(parts))
    return out


def build_corpus(specials):
    rng = random.Random(SEED)
    corpus = [""]
    corpus += python_snippets(rng)
    corpus += whitespace_strings(rng)
    corpus += ACCENTED + [" " + a for a in ACCENTED] + [a.upper() + " " + a for a in ACCENTED]
    corpus += CJK + [c + " " + rng.choice(WORDS) for c in CJK]
    corpus += EMOJI + [rng.choice(WORDS) + " " + e + " " + rng.choice(WORDS) for e in EMOJI]
    corpus += ODD + ["x" + o + "y" for o in ODD] + [" " + o for o in ODD]
    corpus += NUMBERS + [" " + n for n in NUMBERS] + ["a" + n + "b" for n in NUMBERS]
    corpus += PUNCT + [w + p for w, p in zip(WORDS, PUNCT)]
    corpus += rare_chars(rng)
    corpus += LONG
    corpus += special_strings(rng, specials)
    corpus += mixtures(rng, [WORDS, WHITESPACE, ACCENTED, CJK, EMOJI, ODD, NUMBERS, PUNCT, specials])
    seen, unique = set(), []
    for s in corpus:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


VARIANT_MAX_CHARS = 300


def golden_for(tok, corpus, bos, max_chars=None):
    cases = []
    for text in corpus:
        if max_chars is not None and len(text) > max_chars:
            cases.append(None)
            continue
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        with_bos = tok.encode(text, add_special_tokens=True).ids
        tok.encode_special_tokens = True
        plain = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        expect_bos = ([bos] if bos is not None else []) + ids
        if with_bos != expect_bos:
            raise SystemExit(f"post-processor does more than prepend BOS for {text!r}: {with_bos}")
        decoded = tok.decode(ids, skip_special_tokens=False)
        case = {"ids": ids}
        if decoded != text:
            case["text"] = decoded
        skip = tok.decode(ids, skip_special_tokens=True)
        if skip != decoded:
            case["text_skip"] = skip
        if plain != ids:
            case["ids_plain"] = plain
            text_plain = tok.decode(plain, skip_special_tokens=False)
            if text_plain != decoded:
                case["text_plain"] = text_plain
        cases.append(case)
    return cases


def random_decodes(tok, name, count=400):
    """Arbitrary id sequences (mostly byte tokens and special tokens) and their decoded texts."""
    rng = random.Random(SEED + zlib.crc32(name.encode()))
    vocab = tok.get_vocab()
    byte_ids = sorted(i for t, i in vocab.items()
                      if len(t) == 1 or (len(t) == 6 and t.startswith("<0x") and t.endswith(">")))
    special_ids = sorted(tok.get_added_tokens_decoder())
    size = tok.get_vocab_size()
    out = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(0, 24)):
            r = rng.random()
            pool = byte_ids if r < 0.6 else special_ids if r < 0.7 else None
            ids.append(rng.choice(pool) if pool else rng.randrange(size))
        case = {"ids": ids, "text": tok.decode(ids, skip_special_tokens=False)}
        skip = tok.decode(ids, skip_special_tokens=True)
        if skip != case["text"]:
            case["text_skip"] = skip
        out.append(case)
    return out


def tokenizer_folders():
    folders = dict(TOKENIZERS)
    variants = os.path.join(ROOT, VARIANT_DIR)
    if os.path.isdir(variants):
        for name in sorted(os.listdir(variants)):
            if os.path.isfile(os.path.join(variants, name, "tokenizer.json")):
                folders[name] = f"{VARIANT_DIR}/{name}"
    return folders


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tokenizer"))
    args = ap.parse_args()

    folders = tokenizer_folders()
    toks = {name: Tokenizer.from_file(os.path.join(ROOT, rel, "tokenizer.json")) for name, rel in folders.items()}
    specials = sorted({t.content for tok in toks.values() for t in tok.get_added_tokens_decoder().values()})
    corpus = build_corpus(specials)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=True, indent=0)
        f.write("\n")
    for name, rel in folders.items():
        tok = toks[name]
        post = tok.post_processor
        probe = tok.encode("", add_special_tokens=True).ids
        bos = probe[0] if probe else None
        doc = {"tokenizer": rel, "tokenizers_version": tokenizers.__version__, "bos_prepend": bos,
               "random_decodes": random_decodes(tok, name),
               "cases": golden_for(tok, corpus, bos, None if name in TOKENIZERS else VARIANT_MAX_CHARS)}
        path = os.path.join(args.out, f"golden_{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write("{\n")
            for key in ("tokenizer", "tokenizers_version", "bos_prepend"):
                f.write(f"{json.dumps(key)}: {json.dumps(doc[key])},\n")
            f.write('"random_decodes": [\n')
            f.write(",\n".join(json.dumps(c, ensure_ascii=True, separators=(",", ":")) for c in doc["random_decodes"]))
            f.write("\n],\n")
            f.write('"cases": [\n')
            f.write(",\n".join(json.dumps(c, ensure_ascii=True, separators=(",", ":")) for c in doc["cases"]))
            f.write("\n]}\n")
        print(f"{path}: {len(corpus)} strings (post-processor {type(post).__name__ if post else None})")


if __name__ == "__main__":
    sys.exit(main())
