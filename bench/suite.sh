#!/usr/bin/env bash
# Every standard benchmark, one process each, appending JSON lines to a file;
# `python bench/table.py FILE` turns the file into the tables of BUILD_NOTES.md.
#
#   bench/suite.sh bench/results/DATE.jsonl [ROUNDS]
#
# ROUNDS (default 2) repeats the whole list, variants interleaved, so a noisy
# minute on a shared machine hits one sample, not one variant; table.py takes
# the median over rounds. Needs an otherwise idle machine (see README.md).
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
done
run export_latency.py
run run.py --work scaling --mixed_precision=bfloat16
run matmul_peak.py
