"""Which precision computes fast on this machine, whether TensorFlow's
oneDNN kernels compute (`t2tlite.onednn`), and whether the int8 search can
run (`int8_support`): the choices, made from a `t2tlite.hardware.Device`.

    device = hardware.describe_device()        # CPU model and flags, GPUs
    choice = choose("auto", device)            # Choice(precision=..., ...)
    announce(choice)                           # logs the choice and why
    build_model(hp, vocab_size, dtype=choice.keras_policy)
    int8_support(device)                       # -> Int8Support(available, ...)

The rule (`auto`): bfloat16 where the device computes it natively (GPUs of
compute capability >= 8.0; CPUs with the avx512_bf16 or amx_bf16 flag),
float16 with dynamic loss scaling on GPUs with tensor cores but no bfloat16
(compute capability 7.x), float32 elsewhere. Elsewhere bfloat16 and float16
are emulated (converted to float32 around every operation) and run slower
than float32, so `auto` never picks them there.

A CPU flag is not enough on its own (`t2tlite.bfloat16_check`): on a CPU
with a bfloat16 flag `auto` keeps float32 unless a bfloat16 matmul measured
at least `MIN_BFLOAT16_SPEEDUP` times as fast as a float32 one there. An
explicit precision is used as asked; if the device only emulates it, the
choice carries a warning naming the reason and the faster precision.

Weights stay float32 in every case (Keras "mixed_*" policies), so
checkpoints do not depend on the precision a run trained in.
"""
import dataclasses

from absl import logging

from t2tlite import bfloat16_check
from t2tlite import hardware
from t2tlite import lean_start
from t2tlite import onednn
from t2tlite import quiet

PRECISIONS = ("bfloat16", "float16", "float32")
AUTO = "auto"
# An export is served elsewhere: float32 (the default) or bfloat16 on request.
EXPORT_PRECISIONS = ("float32", "bfloat16")
# Keras dtype policy of each precision (None: Keras's float32 default).
KERAS_POLICY = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16",
                "float32": None}
# bfloat16 must beat float32 by this much on a CPU's measured matmul for
# auto to pick it. Seen: 0.3x (emulated, Zen 3), 0.6x (Intel, AMX hidden),
# 1.8-2.8x (Zen 4, Zen 5): far from the threshold either way, so a noisy
# measurement does not flip the choice.
MIN_BFLOAT16_SPEEDUP = 1.2
GPU_BF16_CAPABILITY = (8, 0)     # Ampere and later
GPU_FP16_CAPABILITY = (7, 0)     # tensor cores (Volta, Turing)


@dataclasses.dataclass(frozen=True)
class Choice:
  """The precision a run computes in, and why.

  Attributes:
    precision: "bfloat16", "float16" or "float32".
    requested: what was asked: "auto" or one of the precisions.
    reason: why this precision (the device and what it computes natively).
    warning: set when an explicit precision is emulated on this device: the
      reason and the faster choice. None otherwise.
    onednn: whether TensorFlow's oneDNN kernels compute, and why ("oneDNN
      on (default set by t2tlite)"); "" when not known.
  """
  precision: str
  requested: str
  reason: str
  warning: str | None = None
  onednn: str = ""

  @property
  def keras_policy(self):
    """The Keras dtype policy name for build_model (None = float32)."""
    return KERAS_POLICY[self.precision]

  @property
  def loss_scaling(self):
    """float16 trains with dynamic loss scaling (Keras LossScaleOptimizer)."""
    return self.precision == "float16"

  def to_json(self):
    return dataclasses.asdict(self)


def _native(device):
  """(fastest native precision, why) of a device."""
  gpu = device.slowest_gpu()
  where = device.summary()
  if gpu is not None:
    if gpu.compute_capability >= GPU_BF16_CAPABILITY:
      return "bfloat16", f"{where} computes bfloat16 natively"
    if gpu.compute_capability >= GPU_FP16_CAPABILITY:
      return "float16", (f"{where} has float16 tensor cores but no bfloat16; "
                         "float16 trains with dynamic loss scaling")
    return "float32", f"{where} has no tensor cores"
  if device.cpu_bf16_flags():
    slow = _slow_cpu_bfloat16(device)
    if slow:
      return "float32", slow
    return "bfloat16", f"{where} computes bfloat16 natively"
  return "float32", (f"{where}: bfloat16 would be emulated, slower than "
                     "float32")


def _slow_cpu_bfloat16(device):
  """Why a CPU with a bfloat16 flag still computes bfloat16 too slowly to
  pick (its measured matmul speedup is below MIN_BFLOAT16_SPEEDUP), or
  None."""
  speedup = device.bfloat16_speedup
  if speedup is None or speedup >= MIN_BFLOAT16_SPEEDUP:
    return None
  measured = f"; measured {device.measured}" if device.measured else ""
  return (f"{device.summary()}, but a bfloat16 matmul measured "
          f"{speedup:.2f}x float32 here (below {MIN_BFLOAT16_SPEEDUP}x"
          f"{measured})")


def _emulated_reason(precision, device):
  """Why `precision` is emulated (slow) on device, or None if it is not."""
  gpu = device.slowest_gpu()
  where = device.summary()
  if precision == "bfloat16":
    if gpu is not None and gpu.compute_capability < GPU_BF16_CAPABILITY:
      return f"{where} has no native bfloat16 (needs compute capability >= 8.0)"
    if gpu is None and not device.cpu_bf16_flags():
      return f"{where} emulates bfloat16"
    if gpu is None:
      return _slow_cpu_bfloat16(device)
  if precision == "float16":
    if gpu is None:
      return f"{where} emulates float16 (no CPU computes it natively)"
    if gpu.compute_capability < GPU_FP16_CAPABILITY:
      return f"{where} has no float16 tensor cores"
  return None


def choose(requested, device=None):
  """The precision to compute in.

  Args:
    requested: "auto" (the fast native precision of `device`) or an explicit
      "bfloat16", "float16" or "float32" (used as asked; a warning is set if
      the device only emulates it).
    device: a `hardware.Device`; default `hardware.describe_device()`
      (this machine).
  Returns:
    Choice.
  Raises:
    ValueError: `requested` is not auto or a precision.
  """
  if requested not in (AUTO,) + PRECISIONS:
    raise ValueError(f"mixed_precision={requested!r}: expected auto, "
                     f"{', '.join(PRECISIONS)}")
  device = device or hardware.describe_device()
  native, why = _native(device)
  kernels = onednn_phrase(device)
  if requested == AUTO:
    return Choice(native, requested, why, onednn=kernels)
  emulated = _emulated_reason(requested, device)
  if emulated is None:
    faster = "" if native == requested else f"; auto would pick {native}"
    return Choice(requested, requested, f"asked for{faster} ({why})",
                  onednn=kernels)
  warning = (f"mixed_precision={requested} runs as asked, but {emulated}, so "
             f"it is slower than {native}: use {native} (or auto) for speed.")
  return Choice(requested, requested, f"asked for ({emulated})", warning,
                onednn=kernels)


def onednn_phrase(device):
  """Whether oneDNN computes on `device`, and why ("" without an x86 CPU
  doing the work: a GPU, or another architecture)."""
  if device.gpus or device.machine.lower() not in onednn.X86_MACHINES:
    return ""
  return onednn.describe(device.onednn_enabled, device.onednn_setting)


@dataclasses.dataclass(frozen=True)
class Int8Support:
  """Whether the int8 search (decode hparam int8) can run, and how.

  Attributes:
    available: the quantized kernel computes here.
    reason: why (or why not), naming what is missing.
    weights_first: the int8 layout of weights made in a graph (an
      export's; `t2tlite.layers.int8`): the weights as the kernel's first
      operand, fast where oneDNN may use VNNI. A Decoder's are held by
      oneDNN in its own layout (`search.fixed_search_weights`).
  """
  available: bool
  reason: str
  weights_first: bool = False


# ONEDNN_MAX_CPU_ISA values below AVX2: the int8 search was built and
# checked for AVX2's u8 x s8 multiply-add and later only.
ISA_CAPS_BELOW_AVX2 = ("SSE41", "AVX")


def int8_support(device):
  """Whether `device` runs the int8 search (pure: reads only `device`).

  TensorFlow registers `QuantizedMatMulWithBiasAndDequantize` on the CPU
  with a no-op kernel; the kernel that computes is oneDNN's
  (`_MklQuantizedMatMulWithBiasAndDequantize`, u8 x s8 inner product), put
  in its place by the oneDNN graph rewrite, which runs only when
  TensorFlow's oneDNN path is on (IsMKLEnabled: TF_ENABLE_ONEDNN_OPTS=1, or
  TensorFlow's default on CPUs with AVX512_VNNI, AVX512_BF16 or AMX). With
  it off the op leaves its output unset ("Missing 0-th output"). oneDNN
  computes u8 x s8 on every x86 ISA it supports; VNNI only decides the fast
  layout (`weights_first`).
  """
  gpu = device.slowest_gpu()
  if gpu is not None:
    return Int8Support(False, f"int8 decoding is for CPUs, and {gpu.name} "
                       "decodes in its own precision")
  if device.machine.lower() not in onednn.X86_MACHINES:
    return Int8Support(False, f"int8 decoding needs an x86 CPU (this is "
                       f"{device.machine})")
  if not device.onednn_enabled:
    return Int8Support(False, "the int8 kernel exists only on TensorFlow's "
                       "oneDNN path, and " +
                       onednn.describe(False, device.onednn_setting))
  cap = device.isa_cap.upper()
  if "avx2" not in device.cpu_flags or cap in ISA_CAPS_BELOW_AVX2:
    below = (f"ONEDNN_MAX_CPU_ISA={device.isa_cap}" if cap in
             ISA_CAPS_BELOW_AVX2 else "this CPU has no avx2")
    return Int8Support(False, "int8 decoding needs AVX2 or later, and "
                       + below)
  vnni = device.cpu_vnni_flags()
  if vnni:
    return Int8Support(True, f"oneDNN's u8 x s8 kernel with {vnni[0]}",
                       weights_first=True)
  # Named only where it is the cap's doing: ALL, or a cap that keeps
  # VNNI, leaves a CPU without it as it is.
  without = (f" (ONEDNN_MAX_CPU_ISA={device.isa_cap} rules VNNI out)"
             if cap in hardware.ISA_CAPS_WITHOUT_AVX512_VNNI else "")
  return Int8Support(True, "oneDNN's u8 x s8 kernel with AVX2's "
                     f"multiply-add, no VNNI{without}")


_warned = set()


def announce(choice, what="Training"):
  """Logs the choice and its reason; logs its warning once per process.

  Args:
    choice: a Choice.
    what: the computation, for the message ("Training", "Decoding").
  """
  kernels = f"; {choice.onednn}" if choice.onednn else ""
  logging.info("%s computes in %s (mixed_precision=%s): %s%s.", what,
               choice.precision, choice.requested, choice.reason, kernels)
  if choice.warning and choice.warning not in _warned:
    _warned.add(choice.warning)
    logging.warning("%s", choice.warning)


def main(argv=None):
  """`python -m t2tlite.precision [--remeasure]`: the machine, auto's
  choice, oneDNN and int8 there. A command: TensorFlow's start-up notices
  are hidden and Keras's notebook imports skipped as in the t2t-* commands
  (`t2tlite.quiet`, `t2tlite.lean_start`)."""
  quiet.install()
  lean_start.install()
  import argparse
  parser = argparse.ArgumentParser(
      prog="python -m t2tlite.precision",
      description="Prints this machine, the precision "
      "--mixed_precision=auto picks here, whether TensorFlow's oneDNN "
      "kernels compute and whether decode hparam int8 can run. On a CPU "
      "with a bfloat16 flag the "
      "choice rests on a measured bfloat16/float32 matmul speedup, measured "
      "once per machine and kept in " + bfloat16_check.speedup_cache_path()
      + ".")
  parser.add_argument("--remeasure", action="store_true",
                      help="measure the bfloat16 speedup again and keep the "
                      "new figure (for instance after a measurement taken "
                      "while the machine was busy)")
  args = parser.parse_args(argv)
  device = hardware.describe_device(remeasure=args.remeasure)
  print(f"machine: {hardware.machine_line(device)}")
  choice = choose(AUTO, device)
  if device.bfloat16_speedup is not None:
    print(f"bfloat16 matmul speedup: {device.bfloat16_speedup}x "
          f"(auto needs {MIN_BFLOAT16_SPEEDUP}x; measured {device.measured})")
  print(f"auto precision: {choice.precision} ({choice.reason})")
  if choice.onednn:
    print(f"kernels: {choice.onednn}")
  int8 = int8_support(device)
  layout = ", weights first in exports" if int8.weights_first else ""
  print(f"int8 decoding: {'available' if int8.available else 'unavailable'} "
        f"({int8.reason}{layout})")


if __name__ == "__main__":
  main()
