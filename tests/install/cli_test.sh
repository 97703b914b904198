#!/usr/bin/env bash
# The specla command-line program: help, generate (token ids), logits dumps, and refusals of bad
# arguments with a non-zero exit and a message. Runs on tests/fixtures/gdn_tiny_a (checked
# against flash-linear-attention's greedy tokens) and on models/gdn-pycode-22m.
# Also: --version, short options, stdin prompts, the tokenize and bench subcommands, the warning for
# draft options without --speculative, and Ctrl-C (SIGINT/SIGTERM) ending a generation cleanly.
# Usage: cli_test.sh SPECLA_PROGRAM SOURCE_DIR
set -euo pipefail

CLI=${1:?specla program}
SRC=${2:?source dir}
TINY="$SRC/tests/fixtures/gdn_tiny_a"
PYCODE="$SRC/models/gdn-pycode-22m"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/specla-cli-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

step() { echo "== $*"; }
die() {
    echo "FAIL: $*" >&2
    exit 1
}

# The JSON header of a safetensors file.
st_header() {
    local len
    len=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    head -c $((8 + len)) "$1" | tail -c "$len"
}

# An I32 tensor of a safetensors file as comma-separated ids.
st_i32_csv() {
    local file=$1 name=$2 header len range begin end
    header=$(st_header "$file")
    len=$(od -An -t u8 -N8 "$file" | tr -d ' ')
    range=$(grep -o "\"$name\":{\"dtype\":\"I32\",\"shape\":\[[0-9]*\],\"data_offsets\":\[[0-9]*,[0-9]*\]" <<<"$header" |
        sed 's/.*data_offsets":\[\([0-9]*\),\([0-9]*\)\]/\1 \2/')
    [[ -n "$range" ]] || die "no I32 tensor $name in $file"
    read -r begin end <<<"$range"
    od -An -v -t d4 -j $((8 + len + begin)) -N $((end - begin)) "$file" | tr -s ' \n' ',' | sed 's/^,//; s/,$//'
}

# Runs the program expecting failure: exit code non-zero and stderr containing every pattern.
expect_fail() {
    local what=$1
    shift
    local -a patterns=()
    while [[ $1 != -- ]]; do
        patterns+=("$1")
        shift
    done
    shift
    local rc=0
    "$CLI" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    [[ $rc -ne 0 ]] || die "$what: exit code 0 for: specla $*"
    [[ -s "$WORK/err" ]] || die "$what: no message on stderr for: specla $*"
    for p in "${patterns[@]}"; do
        grep -q -- "$p" "$WORK/err" || { cat "$WORK/err" >&2; die "$what: the message does not mention '$p'"; }
    done
    echo "refused ($rc): $what: $(head -n 1 "$WORK/err")"
}

# Checks a logits file: one F32 tensor 'logits' of shape [rows, vocab] and the matching size.
check_logits_file() {
    local file=$1 rows=$2 vocab=$3 header len size
    [[ -s "$file" ]] || die "logits: $file was not written"
    header=$(st_header "$file")
    grep -q "\"logits\":{\"dtype\":\"F32\",\"shape\":\[$rows,$vocab\]" <<<"$header" \
        || die "logits: header '$header' does not say F32 [$rows, $vocab]"
    len=$(od -An -t u8 -N8 "$file" | tr -d ' ')
    size=$(stat -c %s "$file")
    [[ $size -eq $((8 + len + rows * vocab * 4)) ]] || die "logits: file size $size does not match [$rows, $vocab] F32"
}

step "help"
"$CLI" --help >"$WORK/help" || die "--help exited non-zero"
grep -q generate "$WORK/help" && grep -q logits "$WORK/help" || die "--help does not list generate and logits"
"$CLI" generate --help >"$WORK/help" || die "generate --help exited non-zero"
for opt in --model --tokens --max-tokens --temperature --seed; do
    grep -q -- "$opt" "$WORK/help" || die "generate --help does not mention $opt"
done
"$CLI" logits --help | grep -q -- --out || die "logits --help does not mention --out"

step "version"
VERSION=$("$CLI" --version) || die "--version exited non-zero"
echo "$VERSION"
[[ "$VERSION" =~ ^specla\ [0-9]+\.[0-9]+\.[0-9]+\ \(ABI\ [0-9]+ ]] || die "--version printed '$VERSION'"
"$CLI" --help | grep -q tokenize && "$CLI" --help | grep -q bench || die "--help does not list tokenize and bench"

step "generate on gdn_tiny_a"
OUT=$("$CLI" generate --model "$TINY" --tokens 1,2,3 --max-tokens 5 2>"$WORK/err") || { cat "$WORK/err"; die "generate failed"; }
echo "$OUT"
[[ "$OUT" =~ ^[0-9]+(,[0-9]+){4}$ ]] || die "generate did not print 5 token ids: '$OUT'"
grep -q "5 tokens" "$WORK/err" || die "generate printed no timing line on stderr"
[[ "$("$CLI" generate --model "$TINY" --tokens 1,2,3 --max-tokens 5 --quiet 2>&1)" == "$OUT" ]] \
    || die "generate --quiet is not quiet or not deterministic"

# flash-linear-attention's own greedy continuation of the fixture prompt.
PROMPT=$(st_i32_csv "$TINY/expected.safetensors" input_ids)
GREEDY=$(st_i32_csv "$TINY/expected.safetensors" greedy_tokens)
N=$(tr ',' '\n' <<<"$GREEDY" | wc -l)
OUT=$("$CLI" generate --model "$TINY" --tokens "$PROMPT" --max-tokens "$N" --ignore-eos --quiet) || die "generate failed"
[[ "$OUT" == "$GREEDY" ]] || die "greedy tokens differ from the fixture's: got $OUT, want $GREEDY"
echo "the fixture's $N greedy tokens: identical"

# Sampling: same seed, same tokens.
A=$("$CLI" generate --model "$TINY" --tokens 1,2,3 --max-tokens 16 --temperature 1 --top-k 40 --seed 5 -q)
B=$("$CLI" generate --model "$TINY" --tokens 1,2,3 --max-tokens 16 --temperature 1 --top-k 40 --seed 5 -q)
[[ "$A" == "$B" ]] || die "sampling with one seed is not reproducible: $A vs $B"

step "logits on gdn_tiny_a"
"$CLI" logits --model "$TINY" --tokens 1,2,3 --out "$WORK/tiny.safetensors" 2>"$WORK/err" || { cat "$WORK/err"; die "logits failed"; }
check_logits_file "$WORK/tiny.safetensors" 3 512
st_header "$WORK/tiny.safetensors"
echo

step "generate and logits on gdn-pycode-22m"
OUT=$("$CLI" generate --model "$PYCODE" --tokens 0,318,1207 --max-tokens 5 --ignore-eos --quiet) || die "generate failed"
echo "$OUT"
[[ "$OUT" =~ ^[0-9]+(,[0-9]+){4}$ ]] || die "generate did not print 5 token ids: '$OUT'"
"$CLI" logits --model "$PYCODE" --tokens 0,318,1207 --out "$WORK/pycode.safetensors" 2>/dev/null || die "logits failed"
check_logits_file "$WORK/pycode.safetensors" 3 8192

step "budgets and prompt bytes"
# A budget of 2^31 - 1 tokens stopped early by a stop string: the program must not reserve room
# for the whole budget (8 GiB of ids). Under a 4 GiB address-space cap such a reservation fails.
# A sanitizer build reserves terabytes of shadow memory at start, so there the cap is left off
# (the huge budget still runs; the no-reservation property is checked by the plain build).
CAP="ulimit -v 4194304"
# (The symbol table is read whole first: under pipefail, grep -q closing the pipe early would
# fail nm with SIGPIPE and hide the match.)
SYMS=$(nm -D "$CLI" 2>/dev/null || true)
if grep -qE '__(asan|tsan)_init' <<<"$SYMS"; then
    CAP=true
    echo "(sanitizer build: no address-space cap)"
fi
OUT=$( ($CAP && "$CLI" generate --model "$PYCODE" --tokens 0,318,1207 --max-tokens 2147483647 \
    --stop "(" --threads 2 --quiet) 2>"$WORK/err") || { cat "$WORK/err" >&2; die "generate with --max-tokens 2147483647 failed"; }
[[ "$OUT" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "generate with a huge budget did not print token ids: '$OUT'"
echo "--max-tokens 2147483647 ($CAP): $(tr ',' '\n' <<<"$OUT" | wc -l) tokens until the stop string"
OUT_SPEC=$( ($CAP && "$CLI" generate --model "$PYCODE" --tokens 0,318,1207 --max-tokens 2147483647 \
    --stop "(" --threads 2 --quiet --speculative) 2>"$WORK/err") || { cat "$WORK/err" >&2; die "speculative generate with --max-tokens 2147483647 failed"; }
[[ "$OUT_SPEC" == "$OUT" ]] || die "speculative ids differ from plain ones: $OUT_SPEC vs $OUT"

# A prompt file with a NUL byte: all of it is the prompt (echoed byte for byte, and what follows
# the NUL steers the continuation), not just the text before the NUL.
printf 'import os\0def hello_world():\n    print(' >"$WORK/nul.txt"
printf 'import os' >"$WORK/cut.txt"
"$CLI" generate --model "$PYCODE" --prompt-file "$WORK/nul.txt" --max-tokens 8 --ignore-eos >"$WORK/nul.out" 2>"$WORK/err" \
    || { cat "$WORK/err" >&2; die "generate from a prompt file with a NUL byte failed"; }
head -c "$(stat -c %s "$WORK/nul.txt")" "$WORK/nul.out" | cmp -s - "$WORK/nul.txt" \
    || die "the prompt echo lost the bytes after the NUL"
FULL=$("$CLI" generate --model "$PYCODE" --prompt-file "$WORK/nul.txt" --max-tokens 8 --ignore-eos -q | od -An -c)
CUT=$("$CLI" generate --model "$PYCODE" --prompt-file "$WORK/cut.txt" --max-tokens 8 --ignore-eos -q | od -An -c)
[[ "$FULL" != "$CUT" ]] || die "the text after the NUL byte did not reach the model (same continuation as without it)"
echo "a NUL in --prompt-file: the whole file is the prompt"

step "streamed text, stop strings and the finish reason"
# The text ends where the stop string begins (with --include-stop right after it, not at the end
# of the token that completed it), and --verbose says why generation finished.
printf 'x = 1\ndef _helper():\n    return 2\n\n\n' >"$WORK/def.txt"
for spec in "" --speculative; do
    # (A sentinel keeps the trailing newlines that command substitution would strip; the
    # program ends its output with one newline of its own.)
    OUT=$("$CLI" generate --model "$PYCODE" --prompt-file "$WORK/def.txt" --max-tokens 200 --stop "def " -q -v $spec \
        2>"$WORK/err"; echo x) || { cat "$WORK/err" >&2; die "generate with --stop failed"; }
    OUT=${OUT%$'\n'x}
    grep -q "SPECLA_FINISH_STOP_STRING" "$WORK/err" && grep -q 'stop string 0 "def "' "$WORK/err" \
        || { cat "$WORK/err" >&2; die "--verbose did not name the stop string $spec"; }
    [[ "$OUT" != *"def "* ]] || die "the stop string is in the text $spec: '$OUT'"
    INC=$("$CLI" generate --model "$PYCODE" --prompt-file "$WORK/def.txt" --max-tokens 200 --stop "def " \
        --include-stop -q $spec; echo x) || die "generate with --include-stop failed"
    INC=${INC%$'\n'x}
    [[ "$INC" == "${OUT}def " ]] || die "--include-stop did not end the text right after the stop string $spec: '$INC'"
done
EOS=$("$CLI" generate --model "$PYCODE" --prompt "if __name__ == '__main__':" --max-tokens 64 -q -v 2>"$WORK/err") \
    || die "generate to EOS failed"
grep -q SPECLA_FINISH_EOS "$WORK/err" || { cat "$WORK/err" >&2; die "--verbose did not report EOS"; }
[[ "$EOS" != *"<|endoftext|>"* ]] || die "EOS text is in the generated text: '$EOS'"
echo "stop strings cut the text; EOS left out; finish reasons reported"

step "short options, stdin prompts, the draft-option warning"
LONG=$("$CLI" generate --model "$PYCODE" --prompt "def add(a, b):" --max-tokens 12 --ignore-eos --quiet)
SHORT=$("$CLI" generate -m "$PYCODE" -p "def add(a, b):" -n 12 --ignore-eos -q)
[[ "$SHORT" == "$LONG" ]] || die "-m/-p/-n differ from --model/--prompt/--max-tokens: '$SHORT' vs '$LONG'"
STDIN=$(printf 'def add(a, b):' | "$CLI" generate -m "$PYCODE" --prompt-file - -n 12 --ignore-eos -q)
[[ "$STDIN" == "$LONG" ]] || die "--prompt-file - (stdin) differs from --prompt: '$STDIN' vs '$LONG'"
"$CLI" generate -m "$PYCODE" -p "x" -n 2 -q --draft-nodes 3 --tree-top-k 2 >/dev/null 2>"$WORK/err" || die "generate with draft options failed"
grep -q -- "--draft-nodes has no effect without --speculative" "$WORK/err" && grep -q -- "--tree-top-k" "$WORK/err" \
    || { cat "$WORK/err" >&2; die "no warning for draft options given without --speculative"; }
"$CLI" generate -m "$PYCODE" -p "x" -n 2 -q -s --draft-nodes 3 >/dev/null 2>"$WORK/err" || die "speculative generate failed"
[[ ! -s "$WORK/err" ]] || { cat "$WORK/err" >&2; die "a warning although --speculative was given"; }
echo "short options, stdin, warning: ok"

step "tokenize"
TEXT='def f(x):
    return x  # done'
IDS=$("$CLI" tokenize -m "$PYCODE" -p "$TEXT") || die "tokenize failed"
echo "$IDS"
[[ "$IDS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "tokenize did not print ids: '$IDS'"
[[ "$(printf '%s' "$TEXT" | "$CLI" tokenize -m "$PYCODE" --prompt-file -)" == "$IDS" ]] || die "tokenize from stdin differs"
N_IDS=$(tr ',' '\n' <<<"$IDS" | wc -l)
[[ $("$CLI" tokenize -m "$PYCODE" -p "$TEXT" --pieces | wc -l) -eq $N_IDS ]] || die "--pieces does not print one line per token"
JSON=$("$CLI" tokenize -m "$PYCODE" -p "$TEXT" --json) || die "tokenize --json failed"
if command -v python3 >/dev/null && python3 -c 'import tokenizers' 2>/dev/null; then
    # Against the reference library, which reads the same tokenizer.json.
    python3 - "$PYCODE" "$TEXT" "$JSON" <<'PY' || die "tokenize differs from the tokenizers library"
import json, sys
from tokenizers import Tokenizer
folder, text, printed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
enc = Tokenizer.from_file(folder + "/tokenizer.json").encode(text, add_special_tokens=False)
assert printed["ids"] == enc.ids, (printed["ids"], enc.ids)
assert printed["pieces"] == enc.tokens, (printed["pieces"], enc.tokens)
assert printed["n_tokens"] == len(enc.ids)
print("tokenize --json equals the tokenizers library:", len(enc.ids), "tokens")
PY
else
    echo "(python3 with tokenizers not found: the comparison with the reference library is skipped)"
fi

step "bench"
"$CLI" bench -m "$PYCODE" -n 24 --repeat 1 >"$WORK/bench" || { cat "$WORK/bench"; die "bench failed"; }
cat "$WORK/bench"
grep -q '^plain ' "$WORK/bench" && grep -q '^speculative .*identical' "$WORK/bench" || die "bench table lacks its rows"
"$CLI" bench -m "$PYCODE" -n 24 --repeat 2 --json >"$WORK/bench.json" || die "bench --json failed"
python3 - "$WORK/bench.json" <<'PY' || die "bench --json is not the expected JSON"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["n_generated"] == 24 and r["repeats"] == 2 and r["outputs_identical"] is True, r
modes = {run["mode"]: run for run in r["runs"]}
assert set(modes) == {"plain", "speculative"}, r
for run in r["runs"]:
    assert run["decode_tokens_per_s"] > 0 and run["first_step_ms"] > 0 and run["tokens_per_pass"] >= 1, run
assert abs(modes["plain"]["speedup"] - 1) < 1e-9
print("bench --json:", {m: round(v["decode_tokens_per_s"]) for m, v in modes.items()}, "tokens/s")
PY

step "Ctrl-C ends a generation cleanly"
# The program keeps a signal ignored when it starts with it ignored (as nohup'd programs expect),
# and a non-interactive shell starts background jobs with SIGINT ignored, as does any caller
# that started this script in the background (a signal ignored on entry stays ignored in the
# shell, whatever `set -m` says). `env --default-signal` gives the program the default
# disposition whatever this script inherited.
# interrupt PID SIG: send SIG, wait for the program (at most 30 s: a program that ignores it
# fails the test instead of hanging it), leave its exit status in $rc and the time in $ms.
interrupt() {
    local pid=$1 sig=$2 t0
    t0=$(date +%s%N)
    kill -s "$sig" "$pid"
    for _ in $(seq 300); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"
        wait "$pid" || true
        die "SIG$sig: the program was still running 30 s after the signal"
    fi
    rc=0
    wait "$pid" || rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
}
for sig in INT TERM; do
    for spec in "" --speculative; do
        env --default-signal=INT,TERM "$CLI" generate -m "$PYCODE" -p "def f(x):" -n 2147483647 --ignore-eos -v \
            --threads 1 $spec \
            >"$WORK/out" 2>"$WORK/err" &
        pid=$!
        sleep 1
        interrupt "$pid" "$sig"
        [[ $rc -eq 130 ]] || { cat "$WORK/err" >&2; die "SIG$sig: exit status $rc, not 130 $spec"; }
        grep -q "SPECLA_FINISH_ABORTED" "$WORK/err" && grep -q "tokens in" "$WORK/err" \
            || { cat "$WORK/err" >&2; die "SIG$sig: no statistics or finish reason after the interrupt $spec"; }
        [[ -z "$spec" ]] || grep -q "speculative:" "$WORK/err" || die "SIG$sig: no speculative statistics"
        [[ -s "$WORK/out" ]] || die "SIG$sig: the text generated before the interrupt was not printed"
        echo "SIG$sig $spec: exit 130 after ${ms} ms, statistics printed"
    done
done
# A long prompt: the interrupt is honoured between prompt blocks.
for i in $(seq 4000); do echo "    value_$i = compute(value_$((i - 1)), $i)"; done >"$WORK/long.txt"
env --default-signal=INT "$CLI" generate -m "$PYCODE" --prompt-file "$WORK/long.txt" -n 4 -q --threads 1 \
    >/dev/null 2>"$WORK/err" &
pid=$!
sleep 0.5
interrupt "$pid" INT
[[ $rc -eq 130 ]] || { cat "$WORK/err" >&2; die "SIGINT during the prompt: exit status $rc, not 130"; }
echo "SIGINT during a long prompt: exit 130 after ${ms} ms"

step "bad arguments are refused"
expect_fail "no subcommand" "subcommand" --
expect_fail "unknown subcommand" -- frobnicate
expect_fail "no --model" "--model" -- generate --tokens 1,2
expect_fail "no prompt" "--tokens" -- generate --model "$TINY"
expect_fail "two prompts" "--tokens" -- generate --model "$TINY" --tokens 1 --prompt x
expect_fail "a non-numeric id" "not a token id" -- generate --model "$TINY" --tokens 1,x,3
expect_fail "an id out of range" "99999" "vocabulary" -- generate --model "$TINY" --tokens 1,99999
expect_fail "a negative id" "-4" -- generate --model "$TINY" --tokens 1,-4
expect_fail "a missing model" "$WORK/no-model" -- generate --model "$WORK/no-model" --tokens 1
expect_fail "an unknown backend" "--backend" -- generate --model "$TINY" --tokens 1 --backend tpu
expect_fail "a non-numeric --max-tokens" "--max-tokens" -- generate --model "$TINY" --tokens 1 --max-tokens abc
expect_fail "a negative --max-tokens" "max_tokens" -- generate --model "$TINY" --tokens 1 --max-tokens -1
expect_fail "top-p above 1" "top_p" -- generate --model "$TINY" --tokens 1 --top-p 1.5
expect_fail "an infinite temperature" "temperature" -- generate --model "$TINY" --tokens 1 --temperature inf
expect_fail "a NaN temperature" "temperature" -- generate --model "$TINY" --tokens 1 --temperature nan
expect_fail "a --max-tokens beyond int32" "--max-tokens" -- generate --model "$TINY" --tokens 1 --max-tokens 2147483648
expect_fail "text generation without a tokenizer" "tokenizer" -- generate --model "$TINY" --prompt "def f():"
expect_fail "a missing --prompt-file" "--prompt-file" -- generate --model "$TINY" --prompt-file "$WORK/none.txt"
expect_fail "logits without --out" "--out" -- logits --model "$TINY" --tokens 1
expect_fail "logits to an unwritable path" "$WORK/no-dir/x.safetensors" -- \
    logits --model "$TINY" --tokens 1 --out "$WORK/no-dir/x.safetensors"
expect_fail "an empty --tokens" "tokens" -- logits --model "$TINY" --tokens , --out "$WORK/x.safetensors"
if [[ ! -e /dev/nvidiactl ]]; then
    expect_fail "the CUDA backend without a GPU" "CUDA" -- generate --model "$TINY" --tokens 1 --backend cuda
fi

echo "cli test: all checks passed"
