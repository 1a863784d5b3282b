"""Shared fixtures: one Multi30k datagen run reused by the data tests.

Test code is laid out as unit/ (library modules), end_to_end/ (the installed
commands and worker processes) and support/ (helpers, the serving stand-in,
plugins; on sys.path through pytest.ini).
"""
import os

import pytest

# Before anything imports TensorFlow: t2tlite turns oneDNN on as it loads
# (t2tlite.onednn), for this process as for the commands it starts.
import t2tlite  # noqa: F401
from t2tlite import lean_start

# Under pytest-xdist each worker, and every command it starts, computes with
# one TensorFlow thread: the workers already keep both cores busy, and two
# processes of two threads each on two cores wait on each other's threads.
# A user's own setting wins; `-n 0` keeps TensorFlow's default.
if os.environ.get("PYTEST_XDIST_WORKER"):
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

# The test processes run the library as the commands run it: their C heap
# keeps what TensorFlow frees for its next step (t2tlite.heap; the
# commands the tests start do it themselves).
from t2tlite import heap  # noqa: E402

heap.keep_freed_memory()

# No test reads XLA's compiled searches kept by an earlier run, nor leaves
# its own in the user's cache: the commands' persistent XLA cache
# (t2tlite.xla_cache) is off here, as a user turns it off, except where
# test_xla_cache.py gives its commands a folder of their own.
from t2tlite import xla_cache  # noqa: E402

if xla_cache.named_folder(os.environ.get(xla_cache.ENV, "")) is None:
  os.environ[xla_cache.ENV] = (
      os.environ.get(xla_cache.ENV, "") + f" {xla_cache.FLAG}=").strip()

from corpora import multi30k_raw_folder
import require_all
import suite_clock

# Files that take minutes (real-data training, the quick start, worker
# faults), longest first. Workers take whole files (pytest.ini), and a file
# of minutes taken last keeps one worker busy while the other idles; so
# these go first, and pytest.ini turns off pytest-xdist's own reordering
# (files with the most tests first, which put these single-test files last).
LONG_FILES = ("test_parsing_real_data.py", "test_quickstart.py",
              "test_faults.py", "test_real_data.py", "test_web.py",
              "test_training_quality.py", "test_multiworker.py",
              "test_multi30k_download.py")


# Tests marked slow that this run left out (pytest.ini's -m "not slow"),
# said in the summary: under pytest-xdist each worker collects, and so
# counts, every test; it hands its count to the controller, which prints.
_SLOW_LEFT_OUT = pytest.StashKey[int]()


def pytest_deselected(items):
  if items:
    stash = items[0].config.stash
    stash[_SLOW_LEFT_OUT] = stash.get(_SLOW_LEFT_OUT, 0) + sum(
        1 for item in items if item.get_closest_marker("slow"))


def pytest_sessionfinish(session):
  workeroutput = getattr(session.config, "workeroutput", None)
  if workeroutput is not None:  # a pytest-xdist worker
    workeroutput["slow_left_out"] = session.config.stash.get(_SLOW_LEFT_OUT,
                                                             0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
  count = getattr(node, "workeroutput", {}).get("slow_left_out", 0)
  stash = node.config.stash
  # Every worker collected the same tests: the largest count, not the sum.
  stash[_SLOW_LEFT_OUT] = max(stash.get(_SLOW_LEFT_OUT, 0), count)


def pytest_terminal_summary(terminalreporter, config):
  recorder = config.stash.get(_RECORDER, None)
  if recorder is not None:
    recorder.write()
    terminalreporter.write_line(
        f"file durations recorded in {suite_clock.RECORD}")
  count = config.stash.get(_SLOW_LEFT_OUT, 0)
  if count:
    terminalreporter.write_line(
        f"{count} slow test{'s' if count > 1 else ''} left out (minutes of "
        "real training each; `python -m pytest -m slow` runs them)")


# Before the tests run, the controller says how long they are expected to
# take (tests/support/suite_clock.py, from recorded file durations); with
# T2TLITE_RECORD_DURATIONS=1 it records this run's durations instead.
_RECORDER = pytest.StashKey[suite_clock.Recorder]()
_SAID = pytest.StashKey[bool]()
_CONTROLLER = {}  # "config": the controller's (or the only process's)


def _is_worker(config):
  return hasattr(config, "workerinput")


def pytest_configure(config):
  if ((_is_worker(config) or
       not config.getoption("numprocesses", default=0)) and
      not config.getoption("collectonly", default=False)):
    # A process that runs tests (not pytest-xdist's controller, nor a
    # --collect-only run) imports TensorFlow once and keeps it: its objects
    # are frozen out of the garbage collector's reach, as the commands
    # freeze them (t2tlite.lean_start), or its full collections would walk
    # them again and again while the tests trace their graphs (a tenth of
    # the time of test_beam_search.py and test_model.py run in one
    # process).
    with lean_start.collector_paused_then_frozen():
      import tensorflow  # noqa: F401
  if _is_worker(config):
    return
  _CONTROLLER["config"] = config
  if os.environ.get(suite_clock.RECORD_ENV):
    config.stash[_RECORDER] = suite_clock.Recorder()


def pytest_runtest_logreport(report):
  config = _CONTROLLER.get("config")
  recorder = config.stash.get(_RECORDER, None) if config else None
  if recorder is not None:
    recorder.add(report)


def _say_expectation(config, nodeids):
  if config.stash.get(_SAID, False):  # every xdist worker collects the same
    return
  config.stash[_SAID] = True
  workers = config.getoption("numprocesses", default=0) or 1
  if not isinstance(workers, int):  # "auto"
    workers = os.cpu_count()
  line = suite_clock.expectation_line(nodeids, workers,
                                      suite_clock.read_record())
  reporter = config.pluginmanager.get_plugin("terminalreporter")
  if line and reporter is not None:
    reporter.write_line(line)


def pytest_collection_finish(session):
  if not _is_worker(session.config) and not session.config.getoption(
      "numprocesses", default=0):
    _say_expectation(session.config, [item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
  _say_expectation(node.config, ids)


# T2TLITE_REQUIRE_ALL=1 (.ci/run): a skip, wherever it is raised (a skipif
# mark, pytest.skip in a fixture or test, an importorskip), fails the test
# with its reason as the one line (tests/support/require_all.py); only a
# skip for what the machine is (require_all.machine_skip) stays a skip.
pytest_runtest_setup = require_all.skip_fails()
pytest_runtest_call = require_all.skip_fails()
pytest_make_collect_report = require_all.collect_skip_fails()


def pytest_collection_modifyitems(config, items):
  def rank(item):
    name = item.path.name
    return LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)
  items.sort(key=rank)  # stable: the other files keep their order


@pytest.fixture(scope="session", autouse=True)
def own_speedup_cache(tmp_path_factory):
  """A fresh cache folder for the measured bfloat16 speedup
  (t2tlite.bfloat16_check) and the traced searches Decoders keep
  (t2tlite.decode.trace_cache, in use here as in the commands), shared by
  this test process and the commands it starts: the suite measures on its
  own machine, never reads what an earlier run kept, and leaves the user's
  cache alone."""
  from t2tlite import bfloat16_check
  from t2tlite.decode import trace_cache
  names = (bfloat16_check.CACHE_DIR_ENV, trace_cache.ENV)
  saved = {name: os.environ.get(name) for name in names}
  os.environ[bfloat16_check.CACHE_DIR_ENV] = str(
      tmp_path_factory.mktemp("t2tlite_cache"))
  os.environ[trace_cache.ENV] = trace_cache.folder() or ""
  yield
  for name, value in saved.items():
    if value is None:
      del os.environ[name]
    else:
      os.environ[name] = value


@pytest.fixture(scope="session")
def multi30k_raw(tmp_path_factory):
  """A raw folder laid out for --raw_data_dir: the first 3000 EN/DE training
  pairs of Multi30k (plain text) and its full val and test2016 sets (gzipped,
  under their original names)."""
  return multi30k_raw_folder(tmp_path_factory.mktemp("multi30k_raw"),
                             ("en", "de"))


@pytest.fixture(scope="session")
def multi30k_data(multi30k_raw, tmp_path_factory):
  """(problem, data_dir, summary): translate_ende_wmt generated from
  `multi30k_raw` with a 1000-piece vocabulary."""
  from t2tlite.problem import get_problem
  import t2tlite.problems  # noqa: F401  (registers the built-in problems)
  problem = get_problem("translate_ende_wmt")
  data_dir = tmp_path_factory.mktemp("multi30k_data")
  summary = problem.generate_data(str(data_dir), raw_data_dir=str(multi30k_raw),
                                  vocab_size=1000)
  return problem, data_dir, summary
