"""The machine the tests run on, for the few expectations that depend on it
(each test that uses these says why)."""
import os

import pytest

import require_all


def cores():
  """CPU cores this process may run on."""
  return len(os.sched_getaffinity(0))


def gpu_visible():
  """Whether TensorFlow (here, and so in the commands a test starts) sees a
  GPU."""
  import tensorflow as tf
  return bool(tf.config.list_physical_devices("GPU"))


def auto_searches():
  """What decode hparam concurrent_searches=0 (auto) resolves to on this
  machine: 1 where a GPU is visible, else 2 on two or more cores and 1 on
  one (`t2tlite.decode.machine.settle`)."""
  if gpu_visible():
    return 1
  return 2 if cores() >= 2 else 1


def skip_unless_cpu_only(what):
  """Skips the calling test where a GPU is visible: `what` is a figure
  recorded on CPUs."""
  if gpu_visible():
    require_all.machine_skip(f"{what} is a CPU figure, and it has a GPU")
