#!/usr/bin/env bash
# Run THERE (the GPU machine of the device tool: one H200, PyTorch installed, no network), from
# the repository root, with the ignored folder .device-data/ carried:
#   tools/device/train_drafter.sh [MINUTES]
# Trains the EAGLE drafter of models/gdn-pycode-22m (tools/drafter/train.py) on the pre-tokenized
# corpus .device-data/pycode-tokens.bin and writes the drafter folder to
# $OUT/gdn-pycode-22m-eagle (config.json, model.safetensors BF16, README.md, train_log.json), the
# log to $OUT/train.log.
#
# Preparing .device-data/ HERE (needs the tokenizers package; ~5 min on 2 busy cores):
#   PYTHONPATH=tools python3 -m drafter.prepare_corpus ../shared/data/pycode-train-40mb.txt.xz \
#       --tokenizer models/gdn-pycode-22m/tokenizer.json --prompts models/gdn-pycode-22m/eval_prompts.json \
#       --out .device-data/pycode-tokens.bin
#   python3 -m pip download safetensors==0.8.0 --only-binary=:all: --no-deps -d .device-data/wheels
# (11.1M tokens, 22 MB; 19 of 2481 documents dropped for containing an eval prompt).
#
# Time: a device command has a 10-minute wall. MINUTES (default 8) bounds the whole training run
# (model load, the validation before and after, the training loop); the rest is for the machine's
# start, Python's imports and writing. train.py stops the loop early enough to validate and write.
#
# Settings: batch 32 x 1024 tokens per step (33k tokens). On the CPU here (2 shared cores) a step
# of batch 2 x 256 took 5-6 s (see the tool's README); on an H200 the pass is bound by kernel
# launches of the chunked recurrence rather than FLOPs, expected well under 0.3 s a step at this
# size, so the 4000 planned steps will not all fit: --max-minutes ends the run and the cosine
# schedule follows the clock (train.py), so the learning rate still decays to its floor.
set -uo pipefail
root="$(pwd)"
OUT="${OUT:-/tmp/specla-device-out}"
MINUTES="${1:-8}"
mkdir -p "$OUT"
log="$OUT/train.log"
: >"$log"
note() { echo "$*" | tee -a "$log"; }

tokens=.device-data/pycode-tokens.bin
[ -f "$tokens" ] || { note "missing $tokens: prepare it here (see the header of this script) and carry .device-data"; exit 2; }
python3 -c 'import torch' 2>/dev/null || { note "PyTorch is not importable on this machine"; exit 2; }
if ! python3 -c 'import safetensors' 2>/dev/null; then
    # No network there: install the wheel carried in .device-data/wheels, into a private folder.
    python3 -m pip install --quiet --no-index --no-deps --target /tmp/specla-pydeps .device-data/wheels/*.whl >>"$log" 2>&1 \
        || { note "safetensors is missing and the carried wheel did not install"; exit 2; }
    export PYTHONPATH="/tmp/specla-pydeps${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$root/tools${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tee -a "$log"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>&1 | tee -a "$log"

# A hard stop a little past the budget, so that a hang still leaves the log.
timeout $(( ${MINUTES%.*} * 60 + 60 )) python3 -m drafter.train \
    --target models/gdn-pycode-22m --tokens "$tokens" --out "$OUT/gdn-pycode-22m-eagle" \
    --device cuda --steps 4000 --batch 32 --seq-len 1024 --lr 2e-3 --warmup 100 \
    --depth 3 --seed 0 --log-every 50 --val-windows 128 --max-minutes "$MINUTES" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
note "train.py exit status $rc"
ls -la "$OUT/gdn-pycode-22m-eagle" 2>&1 | tee -a "$log"
exit "$rc"
