"""bench/suite_cpu.py: the plugin records each test's own CPU, its
children's and what it started; the summary adds them up by file."""
import json
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import suite_cpu  # noqa: E402

BUSY_CHILD = "sum(i * i for i in range(3 * 10**6))"
TESTS = f"""
import subprocess, sys

def test_starts_a_busy_child():
    subprocess.run([sys.executable, "-c", {BUSY_CHILD!r}], check=True)

def test_computes_itself():
    sum(i * i for i in range(3 * 10**6))
"""


@pytest.mark.timeout(120)
def test_records_each_tests_cpu_and_children(tmp_path):
  (tmp_path / "test_work.py").write_text(TESTS)
  out = tmp_path / "records.jsonl"
  # A pytest of its own in tmp_path (no conftest, no TensorFlow), one
  # process: what a worker of the suite does for each test.
  run = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "suite_cpu",
       "-p", "no:cacheprovider", "test_work.py"], cwd=tmp_path,
      capture_output=True, text=True, timeout=100,
      env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(BENCH),
           suite_cpu.OUT_ENV: str(out)})
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
  child, itself = [json.loads(line) for line in out.read_text().splitlines()]
  assert child["test"] == "test_work.py::test_starts_a_busy_child"
  assert child["started"] == [
      f"{pathlib.Path(sys.executable).name} -c {BUSY_CHILD[:40]}"]
  assert child["children_cpu_s"] > 0.05
  assert itself["started"] == [] and itself["children_cpu_s"] == 0
  assert itself["self_cpu_s"] > 0.05
  # Without the file named, the plugin says what is missing.
  unnamed = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu",
       "-p", "no:cacheprovider", "test_work.py"], cwd=tmp_path,
      capture_output=True, text=True, timeout=100,
      env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(BENCH)})
  assert unnamed.returncode == 4, unnamed.stdout + unnamed.stderr
  assert f"set {suite_cpu.OUT_ENV}" in unnamed.stderr


def test_summary_adds_up_by_file():
  def record(test, self_cpu, children, started):
    return {"test": test, "wall_s": 1.0, "self_cpu_s": self_cpu,
            "children_cpu_s": children, "started": started}

  lines = [record("a.py::one", 1.0, 10.0, ["t2t-trainer", "t2t-decoder"]),
           record("a.py::two", 2.0, 0.0, []),
           record("b.py::one", 20.0, 0.0, [])]
  text = suite_cpu.summary(lines, top=5).splitlines()
  assert text[0] == ("3 tests; CPU-s: 23 in the workers, 10 in 2 processes "
                     "they started")
  # Largest first: b.py's 20 CPU-s, then a.py's 13.
  assert text[2].split() == ["20", "20", "0", "0", "1", "b.py"]
  assert text[3].split() == ["13", "3", "10", "2", "2", "a.py"]
  assert len(suite_cpu.summary(lines, top=1).splitlines()) == 3


def test_a_missing_file_or_a_stray_line_is_named(tmp_path):
  missing = tmp_path / "none.jsonl"
  with pytest.raises(SystemExit, match=f"{missing}: No such file"):
    suite_cpu.read_records(str(missing))
  stray = tmp_path / "stray.jsonl"
  stray.write_text('{"test": "a.py::one", "self_cpu_s": 1, '
                   '"children_cpu_s": 0, "started": []}\n\n{"test": 1}\n')
  with pytest.raises(SystemExit, match=f"{stray}, line 3: not a record"):
    suite_cpu.read_records(str(stray))
  stray.write_text("not json\n")
  with pytest.raises(SystemExit, match=f"{stray}, line 1: Expecting value"):
    suite_cpu.read_records(str(stray))
