"""The suite's expected time (tests/support/suite_clock.py): recorded file
durations dealt out to the workers in run order."""
import json

import suite_clock


def test_files_go_to_the_worker_that_frees_first():
  durations = {"a.py": 10.0, "b.py": 3.0, "c.py": 4.0, "d.py": 2.0}
  # a on worker 1; b, then c (b freed at 3), then d (c freed at 7) on 2.
  assert suite_clock.expected_seconds(["a.py", "b.py", "c.py", "d.py"],
                                      durations, 2) == (10.0, 19.0, 0)
  assert suite_clock.expected_seconds(["a.py", "x.py"], durations, 1) == (
      10.0, 10.0, 1)


def test_record_written_then_said_before_a_run(tmp_path):
  class Report:
    def __init__(self, nodeid, duration):
      self.nodeid, self.duration = nodeid, duration

  recorder = suite_clock.Recorder()
  for nodeid, secs in (("tests/a.py::t[1]", 50.0), ("tests/a.py::t[2]", 40.0),
                       ("tests/b.py::u", 30.0)):
    recorder.add(Report(nodeid, secs))
  path = tmp_path / "durations.json"
  recorder.write(str(path))
  record = suite_clock.read_record(str(path))
  assert record["files"] == {"tests/a.py": 90.0, "tests/b.py": 30.0}
  assert json.loads(path.read_text())["machine"] == record["machine"]
  line = suite_clock.expectation_line(
      ["tests/a.py::t[1]", "tests/b.py::u", "tests/c.py::v"], 2, record)
  assert line.startswith("expected: about 1.5 min on 2 workers (2.0 "
                         "worker-minutes, from the durations of ")
  assert line.endswith("; 1 file not in it)")
  assert suite_clock.expectation_line(["tests/b.py::u"], 1, record).startswith(
      "expected: about 30 s on 1 worker (0.5 worker-minutes")
  assert suite_clock.expectation_line(["tests/a.py::t"], 2, None) is None
