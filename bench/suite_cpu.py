"""Where the test suite's CPU goes: a pytest plugin that records, for each
test, its wall time, the CPU of its own process and of the processes it
started, and what it started; and a summary by file.

    PYTHONPATH=bench SUITE_CPU_OUT=/tmp/suite_cpu.jsonl \
        python -m pytest -q -p suite_cpu
    python bench/suite_cpu.py /tmp/suite_cpu.jsonl [--top 40]

A test's time includes its fixtures' setup (pytest runs them inside the
test's protocol), so a module fixture is counted in its first test. The
children's CPU is that of the processes the worker waited for during the
test (`RUSAGE_CHILDREN`): a server started by a module fixture and stopped
at the module's end is counted in the test that stopped it. Only processes
the pytest worker starts itself are listed; what they start in turn is in
their CPU, not in the list. Each worker appends to the same file, one JSON
line a test.
"""
import argparse
import collections
import json
import os
import resource
import subprocess
import time

import pytest

OUT_ENV = "SUITE_CPU_OUT"
_started = []


def _cpu(who):
  usage = resource.getrusage(who)
  return usage.ru_utime + usage.ru_stime


def _short(args):
  """A started process in a few words: its program and first arguments."""
  args = [args] if isinstance(args, (str, bytes)) else list(args)
  words = [os.path.basename(str(args[0]))] + [str(a)[:40] for a in args[1:3]]
  return " ".join(words)


def _record_start(init):
  def recording_init(self, args, *rest, **kwargs):
    _started.append(_short(args))
    return init(self, args, *rest, **kwargs)
  return recording_init


def pytest_configure(config):
  if not os.environ.get(OUT_ENV):
    raise pytest.UsageError(
        f"suite_cpu: set {OUT_ENV} to the file to append the records to")
  subprocess.Popen.__init__ = _record_start(subprocess.Popen.__init__)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 (pytest's names)
  """Around the test's whole protocol: setup, call and teardown."""
  start = (time.time(), _cpu(resource.RUSAGE_SELF),
           _cpu(resource.RUSAGE_CHILDREN), len(_started))
  yield
  with open(os.environ[OUT_ENV], "a") as out:
    out.write(json.dumps({
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        "start": start[0], "wall_s": time.time() - start[0],
        "self_cpu_s": _cpu(resource.RUSAGE_SELF) - start[1],
        "children_cpu_s": _cpu(resource.RUSAGE_CHILDREN) - start[2],
        "started": _started[start[3]:]}) + "\n")


def summary(lines, top):
  """Text: the totals, then the `top` files by CPU."""
  by_file = collections.defaultdict(collections.Counter)
  for line in lines:
    row = by_file[line["test"].split("::")[0]]
    row.update(tests=1, self=line["self_cpu_s"],
               children=line["children_cpu_s"], started=len(line["started"]))
  total = sum(by_file.values(), collections.Counter())
  out = [f"{total['tests']} tests; CPU-s: {total['self']:.0f} in the "
         f"workers, {total['children']:.0f} in {total['started']} processes "
         "they started",
         f"{'CPU-s':>6} {'self':>6} {'child':>6} {'procs':>5} {'tests':>5}"
         "  file"]
  for name, row in sorted(by_file.items(),
                          key=lambda kv: -(kv[1]["self"] +
                                           kv[1]["children"]))[:top]:
    out.append(f"{row['self'] + row['children']:6.0f} {row['self']:6.0f} "
               f"{row['children']:6.0f} {row['started']:5d} "
               f"{row['tests']:5d}  {name}")
  return "\n".join(out)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("records", help="The plugin's JSON lines.")
  parser.add_argument("--top", type=int, default=40)
  args = parser.parse_args()
  print(summary(read_records(args.records), args.top))


def read_records(path):
  """The plugin's records in `path`; a missing file or a line that is not
  one of them exits with one line naming it."""
  try:
    with open(path) as f:
      lines = f.read().splitlines()
  except OSError as error:
    raise SystemExit(f"suite_cpu.py: {path}: {error.strerror}") from None
  records = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
      if not isinstance(record, dict) or not {
          "test", "self_cpu_s", "children_cpu_s", "started"} <= set(record):
        raise ValueError("not a record of suite_cpu's plugin")
    except ValueError as error:
      raise SystemExit(f"suite_cpu.py: {path}, line {number}: {error}"
                       ) from None
    records.append(record)
  return records


if __name__ == "__main__":
  main()
