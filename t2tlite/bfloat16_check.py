"""The measured half of the bfloat16 rule: how many times faster a bfloat16
matmul runs than a float32 one on this CPU, measured once per machine and
kept in a small JSON file.

A CPU flag is not enough on its own: on an Intel Xeon of family 6 model 207
whose hypervisor hides AMX, oneDNN's avx512_bf16 matmul ran at 0.6x the
float32 one. So `t2tlite.hardware.describe_device` gives a CPU with a
bfloat16 flag its measured speedup (`with_kept_speedup`): a 1024^3 matmul
timed in both precisions (`bfloat16_speedup`, about half a second), kept in
`speedup_cache_path()` under the machine's key (the CPU, its usable flags,
ONEDNN_MAX_CPU_ISA and the TensorFlow version), so that every process there
(a run, its resumption, the decoder) makes the same choice. `python -m
t2tlite.precision --remeasure` measures it again.
"""
import dataclasses
import datetime
import json
import os
import statistics
import time

from absl import logging

from t2tlite import files

# Environment variable naming the folder of the measured-speedup file
# (default $XDG_CACHE_HOME/t2tlite, or ~/.cache/t2tlite).
CACHE_DIR_ENV = files.CACHE_DIR_ENV


def speedup_cache_path():
  """The JSON file of measured bfloat16 speedups: {machine key: {"speedup":
  float, "date": "YYYY-MM-DD"}} in $T2TLITE_CACHE_DIR, else
  $XDG_CACHE_HOME/t2tlite, else ~/.cache/t2tlite."""
  return os.path.join(files.cache_folder(), "bfloat16_speedup.json")


def machine_key(device):
  """What the speedup depends on: the CPU, the flags oneDNN may use, the
  ISA cap and the TensorFlow version (its oneDNN kernels).

  Args:
    device: a `t2tlite.hardware.Device`.
  """
  import tensorflow as tf
  flags = " ".join(device.fingerprint_flags())
  return (f"{device.cpu_label()}, {device.cores} cores, {flags}, "
          f"ONEDNN_MAX_CPU_ISA={device.isa_cap or '-'}, TF {tf.__version__}")


def _read_kept(path):
  """The kept speedups ({} if the file is missing; a damaged file is
  logged, named, and treated as empty so that it is measured again)."""
  try:
    with open(path) as f:
      kept = json.load(f)
    if not isinstance(kept, dict):
      raise ValueError("expected a JSON object")
    return kept
  except FileNotFoundError:
    return {}
  except (OSError, ValueError) as e:
    logging.warning("Ignoring %s (%s); measuring the bfloat16 speedup "
                    "again.", path, e)
    return {}


def _keep(path, key, entry):
  """Adds `entry` under `key` to the file at `path`: written to a temporary
  file in the same folder, then renamed over it, so a reader never sees a
  half-written file."""
  folder = os.path.dirname(path)
  os.makedirs(folder, exist_ok=True)
  # Read again rather than reuse the caller's copy: another process (on
  # this machine, or another one sharing the home folder) may have kept its
  # figure during the half-second measurement.
  kept = _read_kept(path)
  kept[key] = entry
  files.atomic_write_bytes(
      path, json.dumps(kept, indent=1, sort_keys=True).encode("utf-8"))


def with_kept_speedup(device, remeasure=False):
  """`device` (a `t2tlite.hardware.Device`) with its bfloat16 speedup, from
  the kept file or measured now (and kept; a folder that cannot be written
  is logged and skipped)."""
  path = speedup_cache_path()
  key = machine_key(device)
  entry = None if remeasure else _read_kept(path).get(key)
  if not (isinstance(entry, dict) and
          isinstance(entry.get("speedup"), (int, float))):
    entry = {"speedup": bfloat16_speedup(),
             "date": datetime.date.today().isoformat()}
    try:
      _keep(path, key, entry)
    except OSError as e:
      logging.warning("Could not keep the bfloat16 speedup in %s (%s); "
                      "each process will measure it.", path, e)
  return dataclasses.replace(
      device, bfloat16_speedup=float(entry["speedup"]),
      measured=f"{entry.get('date', '?')}, kept in {path}")


def matmul_timer(dtype, n):
  """A callable that times one n x n x n tf.matmul product in `dtype`
  (seconds, the result read back), after one warm-up product."""
  import tensorflow as tf
  a = tf.random.stateless_normal([n, n], seed=[1, 2], dtype=dtype)
  b = tf.random.stateless_normal([n, n], seed=[3, 4], dtype=dtype)
  product = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)[0, :1]))
  product(a, b).numpy()

  def seconds():
    start = time.perf_counter()
    product(a, b).numpy()
    return time.perf_counter() - start

  return seconds


def bfloat16_speedup(n=1024, pairs=15, warmup_pairs=4):
  """How many times faster an n^3 tf.matmul runs in bfloat16 than in
  float32 here, rounded to 0.01.

  The two precisions alternate: `warmup_pairs` products each that do not
  count, then `pairs` that do (about 0.5 s in all for n=1024). The result is
  the median of the pairs' ratios: the two products of a pair run back to
  back, so a phase of load or of a slow kernel touches both, and the
  median drops the pairs a burst split. The first products of a process
  ran float32 up to 2x slower than later ones on a Xeon virtual machine,
  hence the warm-up.
  """
  timers = {dtype: matmul_timer(dtype, n)
            for dtype in ("float32", "bfloat16")}
  for _ in range(warmup_pairs):
    for timer in timers.values():
      timer()
  ratios = [timers["float32"]() / timers["bfloat16"]() for _ in range(pairs)]
  return round(statistics.median(ratios), 2)
