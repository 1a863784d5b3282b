#!/usr/bin/env bash
# Every standard benchmark, one process each, appending JSON lines to a file;
# `python bench/table.py FILE` turns the file into the tables of BUILD_NOTES.md.
#
#   bench/suite.sh bench/results/DATE.jsonl [ROUNDS]
#
# ROUNDS (default 2) repeats the whole list, variants interleaved, so a noisy
# minute on a shared machine hits one sample, not one variant; table.py takes
# the median over rounds. Needs an otherwise idle machine (see README.md).
# With PEER_PYTHON set to a Python that has torch (see README.md), every round
# also runs the PyTorch peer on the training works, for a same-machine ratio.
set -euo pipefail
out=${1:?usage: bench/suite.sh RESULTS.jsonl [ROUNDS]}
rounds=${2:-2}
bench=$(cd "$(dirname "$0")" && pwd)
export TF_CPP_MIN_LOG_LEVEL=2

run() { python "$bench/$1" "${@:2}" 2>/dev/null | tee -a "$out"; }

run matmul_peak.py
for round in $(seq "$rounds"); do
  for precision in "" --mixed_precision=bfloat16; do
    for xla in "" --xla; do
      run run.py --work train_base $precision $xla
      run run.py --work train_tiny $precision $xla
      run run.py --work decode_base $precision $xla --check_uncompiled
    done
  done
  if [[ -n "${PEER_PYTHON:-}" ]]; then
    for work in train_base train_tiny; do
      for bf16 in "" --bf16; do
        "$PEER_PYTHON" "$bench/peers/torch_transformer.py" --work $work $bf16 \
            2>/dev/null | tee -a "$out"
      done
    done
  fi
done
run export_latency.py
run run.py --work scaling --mixed_precision=bfloat16
run matmul_peak.py
