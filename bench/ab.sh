#!/usr/bin/env bash
# A change's speed: bench/run.py at an earlier commit and at this checkout,
# alternating, one process each, on an otherwise idle machine.
#
#   bench/ab.sh COMMIT ROUNDS [run.py flags ...]
#   bench/ab.sh b3fbe77 3 --work decode_base --steps 3 --warmup 1 --no_peak_now --int8
#
# COMMIT is checked out into a temporary git worktree (removed at the end)
# and imported from there (PYTHONPATH), the checkout from its own folder.
# Prints one line a run: "before" or "after", sentences/s (or tokens/s) and
# the outputs checksum where the work has one. Ratios mean something only
# within one run of this script.
set -euo pipefail
commit=${1:?usage: bench/ab.sh COMMIT ROUNDS [run.py flags ...]}
rounds=${2:?usage: bench/ab.sh COMMIT ROUNDS [run.py flags ...]}
shift 2
after=$(cd "$(dirname "$0")/.." && pwd)
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT  # if COMMIT cannot be checked out
git -C "$after" worktree add -q --detach "$before" "$commit"
trap 'git -C "$after" worktree remove --force "$before"' EXIT
export TF_CPP_MIN_LOG_LEVEL=2

one() {  # one LABEL FOLDER: a run of FOLDER's bench/run.py on FOLDER's code
  (cd "$2" && PYTHONPATH="$2" python bench/run.py "${@:3}" 2>/dev/null) |
    tail -1 | python -c "
import json, sys
line = json.loads(sys.stdin.read())
speed = line.get('sentences_per_s', line.get('tokens_per_s'))
print('$1', speed, line.get('outputs_checksum', ''))"
}

for _ in $(seq "$rounds"); do
  one before "$before" "$@"
  one after "$after" "$@"
done
