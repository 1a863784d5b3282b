#!/usr/bin/env bash
# The test suite's line coverage of the project's packages (t2tlite,
# problems, hparams): the README's test command under coverage.py, with the
# pytest-xdist workers and every Python process the tests start measured
# too (coverage's `patch = subprocess`), their data combined.
#
#   bench/suite_coverage.sh CHECKOUT OUT_DIR [PYTEST_ARG ...]
#
# CHECKOUT is the tree to measure, installed (`pip install -e
# 'CHECKOUT[test,serving]'`; an older commit's tree works the same); needs
# coverage >= 7.10 (`pip install coverage`). Writes OUT_DIR/pytest.log,
# report.txt (per file) and coverage.json, and prints the total line.
# PYTEST_ARGs follow the README's command (`--ignore=tests/unit/x.py` to
# measure a part of the suite).
# Processes killed by a signal (the fault tests' SIGKILL) or started with a
# cleaned environment leave no data: the same for every commit measured.
# Coverage slows Python code, so compare runs of this script, not its
# times with the plain suite's.
set -euo pipefail
usage="usage: bench/suite_coverage.sh CHECKOUT OUT_DIR [PYTEST_ARG ...]"
checkout=$(cd "${1:?$usage}" && pwd)
mkdir -p "${2:?$usage}"
out=$(cd "$2" && pwd)
cat > "$out/coveragerc" <<EOF
[run]
source_pkgs = t2tlite, problems, hparams
patch = subprocess
parallel = true
data_file = $out/.coverage
# Processes that never import the project (fresh export clients) would
# print warnings on stderr, which some tests read.
disable_warnings = no-data-collected, module-not-imported, module-not-measured
EOF
cd "$checkout"
export TF_CPP_MIN_LOG_LEVEL=2 T2TLITE_REQUIRE_ALL=1
export COVERAGE_RCFILE="$out/coveragerc"
status=0
python -m coverage run -m pytest -q -p no:cacheprovider "${@:3}" \
  > "$out/pytest.log" 2>&1 || status=$?
python -m coverage combine -q
python -m coverage report --precision=2 > "$out/report.txt"
python -m coverage json -q -o "$out/coverage.json"
echo "pytest exit status $status: $(tail -1 "$out/pytest.log")"
tail -1 "$out/report.txt"
