"""How long the suite is expected to take, said before it runs, and the
recorded file durations that expectation comes from.

Files are what the workers take (pytest.ini: `--dist loadfile`), so the
expectation deals the selected files out in run order, each to the worker
that frees first, from their recorded durations
(tests/support/expected_durations.json); files missing from the record
are counted and said. `T2TLITE_RECORD_DURATIONS=1 python -m pytest`
writes the record anew from the run (to a temporary name, then renamed).
"""
import collections
import datetime
import json
import os
import platform

RECORD = os.path.join(os.path.dirname(__file__), "expected_durations.json")
RECORD_ENV = "T2TLITE_RECORD_DURATIONS"


def file_of(nodeid):
  """'tests/unit/test_x.py::test_y[a]' -> 'tests/unit/test_x.py'."""
  return nodeid.split("::", 1)[0]


def read_record(path=RECORD):
  """The record ({"files": {file: seconds}, "machine": ..., "date": ...}),
  or None when there is none."""
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    return None


def expected_seconds(files, durations, workers):
  """(wall seconds, worker seconds, files without a duration): `files` in
  run order, each taken by the worker that frees first."""
  free_at = [0.0] * max(1, workers)
  unknown = 0
  for name in files:
    if name not in durations:
      unknown += 1
    first = free_at.index(min(free_at))
    free_at[first] += durations.get(name, 0.0)
  return max(free_at), sum(free_at), unknown


def expectation_line(nodeids, workers, record):
  """The line said before the tests run, or None without a record."""
  if not record:
    return None
  files = list(dict.fromkeys(file_of(nodeid) for nodeid in nodeids))
  wall, total, unknown = expected_seconds(files, record["files"], workers)
  untimed = (f"; {unknown} file{'s' if unknown != 1 else ''} not in it"
             if unknown else "")
  about = f"{wall / 60:.1f} min" if wall >= 60 else f"{wall:.0f} s"
  return (f"expected: about {about} on {workers} worker"
          f"{'s' if workers != 1 else ''} ({total / 60:.1f} worker-minutes, "
          f"from the durations of {record['date']} on {record['machine']}"
          f"{untimed})")


class Recorder:
  """Sums each file's test durations (setup, call, teardown) as reports
  arrive; `write` keeps them as the record."""

  def __init__(self):
    self.files = collections.defaultdict(float)

  def add(self, report):
    self.files[file_of(report.nodeid)] += report.duration

  def write(self, path=RECORD):
    record = {"date": datetime.date.today().isoformat(),
              "machine": machine_label(),
              "files": {name: round(secs, 1)
                        for name, secs in sorted(self.files.items())}}
    temporary = f"{path}.tmp"
    with open(temporary, "w") as f:
      json.dump(record, f, indent=1)
      f.write("\n")
    os.replace(temporary, path)


def machine_label():
  """'2-core <CPU model name> (family F model M)' from /proc/cpuinfo."""
  fields = {}
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
  except OSError:
    pass
  name = fields.get("model name") or platform.processor() or "a CPU"
  kind = (f" (family {fields['cpu family']} model {fields['model']})"
          if "cpu family" in fields and "model" in fields else "")
  return f"{os.cpu_count()}-core {name}{kind}"
