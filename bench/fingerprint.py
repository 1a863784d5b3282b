"""Where a benchmark figure was measured: one line naming the machine, and
its matmul peaks.

    from fingerprint import fingerprint     # a script under bench/
    print(f"machine: {fingerprint()}")

    python bench/fingerprint.py              # the line of this machine

The line: the CPU (family and model), cores, the flags that decide matmul
speed (a minus sign for each one missing), ONEDNN_MAX_CPU_ISA when set,
GPUs, TensorFlow's version, the intra-op threads when a program set them,
and 1024^3 matmul GFLOP/s in float32 and bfloat16. Only the benchmarks use
it; the library's choice of precision (t2tlite.precision) needs none of it,
and its machine line without the peaks is `t2tlite.hardware.machine_line`.
"""
import functools
import statistics

from t2tlite import bfloat16_check
from t2tlite import hardware


def matmul_seconds(dtype="float32", n=1024, repeats=5):
  """Seconds of each of `repeats` n x n x n tf.matmul products in `dtype`,
  after one warm-up, each result read back (a list)."""
  timer = bfloat16_check.matmul_timer(dtype, n)
  return [timer() for _ in range(repeats)]


def matmul_gflops(dtype="float32", n=1024, repeats=5):
  """GFLOP/s (2 n^3 per product) of an n^3 tf.matmul in `dtype`, the median
  of `repeats` products (`matmul_seconds`)."""
  return 2 * n**3 / statistics.median(matmul_seconds(dtype, n, repeats)) / 1e9


def fingerprint(device=None, peaks=None, n=1024):
  """One line saying where a figure was measured, e.g.

      AMD EPYC (family 26 model 2), 2 cores, avx2 avx512f avx512_bf16
      -amx_bf16, no GPU, TF 2.21.0, matmul 1024^3: float32 180 GFLOP/s,
      bfloat16 350 GFLOP/s

  Args:
    device: a `t2tlite.hardware.Device`; default this machine.
    peaks: {"float32": GFLOP/s, "bfloat16": GFLOP/s}; default measured now
      (`machine_peaks`, about a second).
    n: the matmul size the peaks are of.
  """
  import tensorflow as tf
  device = device or hardware.describe_device()
  if peaks is None:
    # Under an ISA cap without bfloat16, oneDNN aborts on a bfloat16 matmul.
    capped = device.isa_cap and not device.cpu_bf16_flags()
    peaks = machine_peaks(n, bfloat16=not capped)
  matmul = ", ".join(f"{dtype} {gflops:.0f} GFLOP/s"
                     for dtype, gflops in peaks.items())
  # Set by a program (e.g. `machine.set_search_threads`): the peaks are
  # then those of that many threads an op.
  threads = tf.config.threading.get_intra_op_parallelism_threads()
  threads = f", {threads} intra-op thread(s)" if threads else ""
  return (f"{hardware.machine_line(device)}{threads}, matmul {n}^3: "
          f"{matmul}")


@functools.lru_cache(maxsize=None)
def machine_peaks(n=1024, bfloat16=True):
  """{"float32": GFLOP/s, "bfloat16": GFLOP/s} of an n^3 matmul (measured
  once per process; float32 only without `bfloat16`)."""
  dtypes = ("float32", "bfloat16") if bfloat16 else ("float32",)
  return {dtype: round(matmul_gflops(dtype, n), 1) for dtype in dtypes}


if __name__ == "__main__":
  print(fingerprint())
