"""bench/mutants.py: a mutant is applied to a copy of the repository, never
to the checkout; killed where its tests fail, a survivor without a reason
fails the run, and a mutant whose text is not found once is an error. And
bench/mutants.json still applies to the code as it is."""
import json
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
MUTANTS = [
    {"what": "subtracts", "file": "calc.py", "old": "a + b", "new": "a - b",
     "tests": ["test_calc.py"]},
    {"what": "adds the other way", "file": "calc.py", "old": "a + b",
     "new": "b + a", "tests": ["test_calc.py"]},
    {"what": "not there", "file": "calc.py", "old": "a * b", "new": "a",
     "tests": ["test_calc.py"]},
    {"what": "adds the other way, explained", "file": "calc.py",
     "old": "a + b", "new": "b + a", "tests": ["test_calc.py"],
     "why": "addition commutes"},
]
# The fake repository's tests: the function (logging an error, which a
# failure's output shows above the test's name), and (while a mutant is
# applied) the checkout's file as it was.
TESTS = """import logging
import os
from calc import add

def test_add():
  logging.error("adding")  # a failure's captured log: "ERROR    root:..."
  assert add(2, 3) == 5

def test_the_checkout_is_untouched():
  with open(os.path.join({repo!r}, "calc.py")) as f:
    assert "a + b" in f.read()
"""


@pytest.mark.timeout(120)
def test_mutants_run_on_a_copy(tmp_path):
  repo = tmp_path / "repo"
  repo.mkdir()
  (repo / "calc.py").write_text("def add(a, b):\n  return a + b\n")
  (repo / "test_calc.py").write_text(TESTS.format(repo=str(repo)))
  subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
  subprocess.run(["git", "add", "."], cwd=repo, check=True)
  mutants = tmp_path / "mutants.json"
  mutants.write_text(json.dumps(MUTANTS))
  run = subprocess.run(
      [sys.executable, str(BENCH / "mutants.py"), "--root", str(repo),
       "--mutants", str(mutants)], capture_output=True, text=True,
      timeout=100)
  records = [json.loads(line) for line in run.stdout.splitlines()]
  assert run.returncode == 1, run.stderr[-2000:]
  assert records[0]["killed"] and records[0]["by"] == (
      "test_calc.py::test_add")
  assert not records[1]["killed"] and "why" not in records[1]
  assert "found 0 times" in records[2]["error"]
  assert not records[3]["killed"] and records[3]["why"] == "addition commutes"
  assert records[4] == {"mutants": 4, "killed": 1, "survived": 2,
                        "errors": 1}
  assert (repo / "calc.py").read_text() == (
      "def add(a, b):\n  return a + b\n")


def test_every_listed_mutant_applies_and_names_tests_that_exist():
  """bench/mutants.json against the code as it is: each mutant's text is
  found once in its file and changes it, and each test it names exists (a
  refactoring that moves the text or renames a test shows here, not only
  in the list's long run)."""
  root = BENCH.parent
  mutants = json.loads((BENCH / "mutants.json").read_text())
  stale = []
  for index, mutant in enumerate(mutants):
    source = (root / mutant["file"]).read_text(encoding="utf-8")
    if source.count(mutant["old"]) != 1 or mutant["new"] == mutant["old"]:
      stale.append((index, mutant["file"], "text"))
    for test in mutant["tests"]:
      path, _, name = test.partition("::")
      test_source = (root / path).read_text(encoding="utf-8") if (
          root / path).is_file() else ""
      if not test_source or (
          name and f"def {name.split('[')[0]}(" not in test_source):
        stale.append((index, test, "test"))
  assert mutants and not stale, stale
