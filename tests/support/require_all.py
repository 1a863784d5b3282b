"""T2TLITE_REQUIRE_ALL=1: a skip for something missing is a failure.

A test skips, saying why, when something it needs is missing here: a real
corpus of ../shared/data, chromium or playwright, an extra (ctranslate2,
tensorflow-serving-api). For a user without them that keeps the README's
test command useful; in CI (.ci/run sets the switch) the same skip would
turn a missing corpus or a broken install into a green run. Under the switch
tests/conftest.py's hooks turn each such skip into a failure whose one line
is the skip's own reason. A skip for what the machine is (a GPU, a CPU
without bfloat16 or the int8 kernel: `machine_skip`) stays a skip, since CI
runs on whichever CPU the session has and no install brings a CPU feature.
For example

    FAILED tests/unit/test_vocab.py::test_x - Failed: real corpus
    /work/shared/data/multi30k/raw is absent: put Multi30k task 1 there
    ... (a skip fails under T2TLITE_REQUIRE_ALL=1)

(the reason first, so that pytest's short summary line shows it).
"""
import os

import pytest

ENV = "T2TLITE_REQUIRE_ALL"
# A skip for what this machine is (a GPU, a CPU without a feature) is no
# missing install: it stays a skip under the switch, since CI runs on
# whichever CPU the session has. Its reason starts with this.
MACHINE = "this machine: "


def machine_skip(reason):
  """Skips the calling test for what this machine's CPU or GPU is; a skip
  even under the switch."""
  pytest.skip(MACHINE + reason)


def on():
  """Whether the switch is set (to anything but "", "0")."""
  return os.environ.get(ENV, "") not in ("", "0")


def failure_line(reason):
  """The one line a skip becomes under the switch."""
  reason = " ".join(str(reason).split()) or "skipped with no reason given"
  return f"{reason} (a skip fails under {ENV}=1)"


def skip_fails():
  """A pytest_runtest_setup or pytest_runtest_call wrapper: under the
  switch a skip raised in that phase fails the test with the skip's reason
  instead."""

  @pytest.hookimpl(wrapper=True)
  def wrapper(item):  # noqa: ARG001  (the hook's argument)
    try:
      return (yield)
    except pytest.skip.Exception as skip:
      if on() and not str(skip.msg).startswith(MACHINE):
        # From None: the report shows the one line, not the skip too.
        raise pytest.fail.Exception(failure_line(skip.msg),
                                    pytrace=False) from None
      raise

  return wrapper


def collect_skip_fails():
  """A pytest_make_collect_report wrapper: under the switch a module that
  skips as it is imported (importorskip) fails to collect instead."""

  @pytest.hookimpl(wrapper=True)
  def wrapper(collector):  # noqa: ARG001  (the hook's argument)
    report = yield
    if report.skipped and on():
      reason = report.longrepr[2]  # (path, line, "Skipped: why")
      report.outcome = "failed"
      report.longrepr = failure_line(reason.removeprefix("Skipped: "))
    return report

  return wrapper
