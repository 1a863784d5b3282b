"""bench/serve_load.py's CPU accounting: a process's CPU from /proc, and
what the CPU a request took allows on the machine's cores."""
import os
import pathlib
import sys
import time

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import serve_load  # noqa: E402


def _burn(seconds):
  """Computes for about `seconds` of this thread's CPU."""
  end = time.thread_time() + seconds
  while time.thread_time() < end:
    sum(i * i for i in range(1000))


def test_cpu_seconds_is_the_process_cpu_time():
  before, own = serve_load.cpu_seconds(os.getpid()), time.process_time()
  _burn(0.3)
  spent = serve_load.cpu_seconds(os.getpid()) - before
  # /proc counts in clock ticks (10 ms here); other threads may add a few.
  assert spent == pytest.approx(time.process_time() - own, abs=0.05)
  assert spent >= 0.25


def test_cpu_bounds_of_a_level():
  level = {"server_cpu_ms_per_request": 4.0, "client_cpu_ms_per_request": 1.0}
  bounds = serve_load.cpu_bounds(level, offline_per_s=1000.0, cores=2)
  # 2 cores / 5 CPU-ms a request = 400 requests/s, 40% of 1,000/s;
  # 40% of it leaves 2000 / 400 - 1 = 4 CPU-ms a request to the server.
  assert bounds["cpu_bound_over_offline"] == pytest.approx(0.4)
  assert bounds["server_cpu_ms_for_40_percent"] == pytest.approx(4.0)
  assert "server_cpu_ms_beyond_search" not in bounds
  # Beside batches of 16 in order that took 2.5 CPU-ms a sentence, the
  # server spent 1.5 more a request.
  in_order = {"cpu_ms_per_sentence": 2.5}
  assert serve_load.cpu_bounds(level, 1000.0, 2, in_order)[
      "server_cpu_ms_beyond_search"] == pytest.approx(1.5)
  assert serve_load.cpu_bounds({"client_cpu_ms_per_request": 1.0}, 1000.0,
                               2) == {}
