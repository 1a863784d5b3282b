"""The suite's own summary: a run that leaves the slow tests out (pytest.ini's
-m "not slow") says how many it left out, in one process and under
pytest-xdist (tests/conftest.py's hooks)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest
import suite_clock

REPO = pathlib.Path(__file__).resolve().parents[2]
# The runs here are of the repository's own suite: under a run that records
# its durations, they must not write their own (empty) record over it.
ENV = {k: v for k, v in os.environ.items() if k != suite_clock.RECORD_ENV}
# Files holding only slow tests: collected fast, nothing runs.
FILES = ("tests/end_to_end/test_quickstart.py",
         "tests/end_to_end/test_parsing_real_data.py")


def slow_tests_in(files):
  return sum(len(re.findall(r"^@pytest\.mark\.slow$",
                            (REPO / name).read_text(), re.M))
             for name in files)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("workers", ["0", "2"])
def test_summary_counts_the_slow_tests_left_out(workers):
  expected = slow_tests_in(FILES)
  assert expected >= 2
  run = subprocess.run(
      [sys.executable, "-m", "pytest", "-n", workers, "-q",
       "-p", "no:cacheprovider", *FILES], cwd=REPO, env=ENV,
      capture_output=True, text=True, timeout=170)
  assert run.returncode == 5, run.stdout[-3000:]  # no test ran
  assert (f"{expected} slow tests left out (minutes of real training each; "
          "`python -m pytest -m slow` runs them)") in run.stdout, run.stdout
  if workers != "0":
    return
  # `-m slow` leaves none out, and says nothing.
  only_slow = subprocess.run(
      [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p",
       "no:cacheprovider", "-m", "slow", "--collect-only", *FILES], cwd=REPO,
      env=ENV, capture_output=True, text=True, timeout=170)
  assert only_slow.returncode == 0, only_slow.stdout[-3000:]
  assert "left out" not in only_slow.stdout
