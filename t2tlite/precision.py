"""Which precision computes fast on this machine, whether TensorFlow's
oneDNN kernels compute (`t2tlite.onednn`), and whether the int8 search can
run (`int8_support`).

    device = describe_device()                 # CPU model and flags, GPUs
    choice = choose("auto", device)            # -> Choice(precision="bfloat16", ...)
    announce(choice)                           # logs the choice and why
    build_model(hp, vocab_size, dtype=choice.keras_policy)
    int8_support(device)                       # -> Int8Support(available, ...)

The rule (`auto`): bfloat16 where the device computes it natively (GPUs of
compute capability >= 8.0; CPUs with the avx512_bf16 or amx_bf16 flag),
float16 with dynamic loss scaling on GPUs with tensor cores but no bfloat16
(compute capability 7.x), float32 elsewhere. Elsewhere bfloat16 and float16
are emulated (converted to float32 around every operation) and run slower
than float32, so `auto` never picks them there.

A CPU flag is not enough on its own: on an Intel Xeon of family 6 model 207
whose hypervisor hides AMX, oneDNN's avx512_bf16 matmul ran at 0.6x the
float32 one. So on a CPU with a bfloat16 flag, `describe_device` also times
a 1024^3 matmul in both precisions (`bfloat16_speedup`, about half a
second), and `auto` keeps float32 unless bfloat16 measured at least
`MIN_BFLOAT16_SPEEDUP` times as fast. The figure is measured once per
machine and kept in a small JSON file (`speedup_cache_path`, keyed by the
CPU, its usable flags, ONEDNN_MAX_CPU_ISA and the TensorFlow version), so
every process there (a run, its resumption, the decoder) makes the same
choice; `python -m t2tlite.precision --remeasure` measures it again. An
explicit precision is used as asked; if the device only emulates it, the
choice carries a warning naming the reason and the faster precision.

Weights stay float32 in every case (Keras "mixed_*" policies), so
checkpoints do not depend on the precision a run trained in.
"""
import dataclasses
import datetime
import functools
import json
import os
import statistics
import tempfile
import time

from absl import logging

from t2tlite import onednn

PRECISIONS = ("bfloat16", "float16", "float32")
AUTO = "auto"
# An export is served elsewhere: float32 (the default) or bfloat16 on request.
EXPORT_PRECISIONS = ("float32", "bfloat16")
# Keras dtype policy of each precision (None: Keras's float32 default).
KERAS_POLICY = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16",
                "float32": None}
# CPU flags (as /proc/cpuinfo names them) that mean native bfloat16 matmuls.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# CPU flags shown in the fingerprint: what decides matmul speed.
FINGERPRINT_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
# oneDNN's ONEDNN_MAX_CPU_ISA values below AVX512_CORE_BF16: with one of
# them set, oneDNN uses no bfloat16 instructions, whatever the CPU has (and
# aborts on a bfloat16 matmul of a CPU that has them).
ISA_CAPS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2",
                         "AVX512_CORE", "AVX512_CORE_VNNI")
# ONEDNN_MAX_CPU_ISA values below VNNI (oneDNN then multiplies int8 with
# AVX2's or AVX-512's multiply-add, whatever the CPU has), and those with
# only the 256-bit AVX-VNNI.
ISA_CAPS_WITHOUT_VNNI = ("SSE41", "AVX", "AVX2", "AVX512_CORE")
ISA_CAPS_WITHOUT_AVX512_VNNI = ISA_CAPS_WITHOUT_VNNI + ("AVX2_VNNI",
                                                       "AVX2_VNNI_2")
CPU_VNNI_FLAGS = ("avx512_vnni", "avx_vnni")
# bfloat16 must beat float32 by this much on a CPU's measured matmul for
# auto to pick it. Seen: 0.3x (emulated, Zen 3), 0.6x (Intel, AMX hidden),
# 1.8-2.8x (Zen 4, Zen 5): far from the threshold either way, so a noisy
# measurement does not flip the choice.
MIN_BFLOAT16_SPEEDUP = 1.2
# Environment variable naming the folder of the measured-speedup file
# (default $XDG_CACHE_HOME/t2tlite, or ~/.cache/t2tlite).
CACHE_DIR_ENV = "T2TLITE_CACHE_DIR"
GPU_BF16_CAPABILITY = (8, 0)     # Ampere and later
GPU_FP16_CAPABILITY = (7, 0)     # tensor cores (Volta, Turing)


@dataclasses.dataclass(frozen=True)
class Gpu:
  """One GPU: its name and CUDA compute capability (major, minor)."""
  name: str
  compute_capability: tuple


@dataclasses.dataclass(frozen=True)
class Device:
  """What decides the fast precision: the CPU and any GPUs.

  Attributes:
    cpu_model: the CPU's model name ("AMD EPYC 7763 64-Core Processor").
    cpu_family, cpu_model_number: /proc/cpuinfo's "cpu family" and "model"
      ("" when unknown).
    cores: logical CPUs.
    cpu_flags: frozenset of /proc/cpuinfo flag names ("avx2", "avx512_bf16")
      that oneDNN may use: `usable_cpu_flags` of the CPU's flags and
      `isa_cap`.
    gpus: tuple of Gpu; empty without GPUs.
    isa_cap: ONEDNN_MAX_CPU_ISA as set for this process ("" when unset).
    bfloat16_speedup: a bfloat16 matmul's speed over a float32 one's, as
      measured on this CPU (`describe_device` measures it when the CPU has
      a bfloat16 flag and there is no GPU); None when not measured.
    measured: when and where that figure was kept ("2026-11-25, kept in
      /root/.cache/t2tlite/bfloat16_speedup.json"), for messages; "" when
      not measured here.
    machine: the processor architecture, as platform.machine() names it.
    onednn_enabled: whether TensorFlow's oneDNN path is on in this process.
    onednn_setting: how TF_ENABLE_ONEDNN_OPTS was set (`onednn.Setting`).
  """
  cpu_model: str = "unknown CPU"
  cpu_family: str = ""
  cpu_model_number: str = ""
  cores: int = 1
  cpu_flags: frozenset = frozenset()
  gpus: tuple = ()
  isa_cap: str = ""
  bfloat16_speedup: float | None = None
  measured: str = ""
  machine: str = "x86_64"
  onednn_enabled: bool = True
  onednn_setting: onednn.Setting = onednn.Setting("1", onednn.BY_T2TLITE)

  def cpu_bf16_flags(self):
    return [f for f in CPU_BF16_FLAGS if f in self.cpu_flags]

  def cpu_label(self):
    """The CPU model with its family and model number when known:
    "AMD EPYC 9654 (family 25 model 17)"."""
    if not self.cpu_family:
      return self.cpu_model
    return (f"{self.cpu_model} (family {self.cpu_family} model "
            f"{self.cpu_model_number})")

  def slowest_gpu(self):
    """The GPU of the lowest compute capability (a multi-GPU step waits for
    it), or None."""
    return min(self.gpus, key=lambda g: g.compute_capability, default=None)

  def summary(self):
    """Short text: the GPU that decides, or the CPU and its bf16 flags."""
    gpu = self.slowest_gpu()
    if gpu is not None:
      major, minor = gpu.compute_capability
      count = f"{len(self.gpus)} x " if len(self.gpus) > 1 else ""
      return f"GPU {count}{gpu.name} (compute capability {major}.{minor})"
    flags = self.cpu_bf16_flags()
    has = (f"with {' and '.join(flags)}" if flags else
           f"without {' or '.join(CPU_BF16_FLAGS)}")
    return f"CPU {self.cpu_model} {has}"


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
    device: a Device; default `describe_device()` (this machine).
  Returns:
    Choice.
  Raises:
    ValueError: `requested` is not auto or a precision.
  """
  if requested not in (AUTO,) + PRECISIONS:
    raise ValueError(f"mixed_precision={requested!r}: expected auto, "
                     f"{', '.join(PRECISIONS)}")
  device = device or describe_device()
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
    weights_first: the int8 layout (`t2tlite.layers.int8`): the weights as
      the kernel's first operand, fast where oneDNN may use VNNI.
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
  vnni = [f for f in CPU_VNNI_FLAGS if f in device.cpu_flags]
  if vnni:
    return Int8Support(True, f"oneDNN's u8 x s8 kernel with {vnni[0]}",
                       weights_first=True)
  without = (f" (ONEDNN_MAX_CPU_ISA={device.isa_cap} rules VNNI out)"
             if device.isa_cap else "")
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


# ---- describing this machine ------------------------------------------------

def _cpuinfo(path="/proc/cpuinfo"):
  """{field: value} of the first processor in /proc/cpuinfo ({} elsewhere)."""
  fields = {}
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      for line in f:
        if not line.strip():
          if fields:
            break
          continue
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
  except OSError:
    pass
  return fields


def usable_cpu_flags(flags, isa_cap=""):
  """The CPU flags oneDNN may use under ONEDNN_MAX_CPU_ISA=`isa_cap`.

  Args:
    flags: iterable of /proc/cpuinfo flag names.
    isa_cap: "" (unset), "ALL", or a oneDNN ISA name such as "AVX2".
  Returns:
    frozenset: `flags` without the bfloat16 and VNNI ones the cap rules
    out.
  """
  flags, cap = frozenset(flags), isa_cap.upper()
  if not cap or cap == "ALL":
    return flags
  ruled_out = set() if "AMX" in cap else {"amx_bf16"}
  if cap in ISA_CAPS_WITHOUT_BF16:
    ruled_out.add("avx512_bf16")
  if cap in ISA_CAPS_WITHOUT_AVX512_VNNI:
    ruled_out.add("avx512_vnni")
  if cap in ISA_CAPS_WITHOUT_VNNI:
    ruled_out.add("avx_vnni")
  return flags - ruled_out


def _gpus():
  """Visible GPUs with their compute capability, via TensorFlow."""
  import tensorflow as tf
  gpus = []
  for device in tf.config.list_physical_devices("GPU"):
    details = tf.config.experimental.get_device_details(device)
    capability = tuple(details.get("compute_capability") or (0, 0))
    gpus.append(Gpu(details.get("device_name", device.name), capability))
  return tuple(gpus)


@functools.lru_cache(maxsize=None)
def describe_device(remeasure=False):
  """This machine's Device: /proc/cpuinfo, TensorFlow's GPU list and, on a
  CPU with a bfloat16 flag and no GPU, the bfloat16 speedup: read from
  `speedup_cache_path()`, or measured (`bfloat16_speedup`) and kept there
  when that file has none for this machine or `remeasure` is set."""
  info = _cpuinfo()
  isa_cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
  import platform
  device = Device(
      cpu_model=info.get("model name") or platform.processor() or
      "unknown CPU",
      cpu_family=info.get("cpu family", ""),
      cpu_model_number=info.get("model", ""),
      cores=os.cpu_count() or 1,
      cpu_flags=usable_cpu_flags(info.get("flags", "").split(), isa_cap),
      gpus=_gpus(), isa_cap=isa_cap, machine=platform.machine(),
      onednn_enabled=onednn.enabled(), onednn_setting=onednn.setting())
  if device.gpus or not device.cpu_bf16_flags():
    return device
  return _with_kept_speedup(device, remeasure)


# ---- the measured speedup, kept per machine ---------------------------------

def speedup_cache_path():
  """The JSON file of measured bfloat16 speedups: {machine key: {"speedup":
  float, "date": "YYYY-MM-DD"}} in $T2TLITE_CACHE_DIR, else
  $XDG_CACHE_HOME/t2tlite, else ~/.cache/t2tlite."""
  folder = os.environ.get(CACHE_DIR_ENV) or os.path.join(
      os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
      "t2tlite")
  return os.path.join(folder, "bfloat16_speedup.json")


def machine_key(device):
  """What the speedup depends on: the CPU, the flags oneDNN may use, the
  ISA cap and the TensorFlow version (its oneDNN kernels)."""
  import tensorflow as tf
  flags = " ".join(f for f in FINGERPRINT_FLAGS if f in device.cpu_flags)
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
  handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
  try:
    with os.fdopen(handle, "w") as f:
      json.dump(kept, f, indent=1, sort_keys=True)
    os.replace(temporary, path)
  except BaseException:
    os.unlink(temporary)
    raise


def _with_kept_speedup(device, remeasure=False):
  """`device` with its bfloat16 speedup, from the kept file or measured now
  (and kept; a folder that cannot be written is logged and skipped)."""
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


def machine_line(device):
  """The machine in one line, as `python -m t2tlite.precision` prints it:
  "AMD EPYC 9654 (family 25 model 17), 2 cores, avx2 avx512f avx512_bf16
  -amx_bf16, no GPU, TF 2.21.0" (benchmarks add matmul peaks:
  bench/fingerprint.py)."""
  import tensorflow as tf
  flags = " ".join(f if f in device.cpu_flags else f"-{f}"
                   for f in FINGERPRINT_FLAGS)
  cap = f" (ONEDNN_MAX_CPU_ISA={device.isa_cap})" if device.isa_cap else ""
  gpus = ", ".join(f"GPU {g.name} cc {g.compute_capability[0]}."
                   f"{g.compute_capability[1]}" for g in device.gpus)
  return (f"{device.cpu_label()}, {device.cores} cores, {flags}{cap}, "
          f"{gpus or 'no GPU'}, TF {tf.__version__}")


def main(argv=None):
  """`python -m t2tlite.precision [--remeasure]`: the machine, auto's
  choice, oneDNN and int8 there."""
  import argparse
  parser = argparse.ArgumentParser(
      prog="python -m t2tlite.precision",
      description="Prints this machine, the precision "
      "--mixed_precision=auto picks here, whether TensorFlow's oneDNN "
      "kernels compute and whether decode hparam int8 can run. On a CPU with a bfloat16 flag the "
      "choice rests on a measured bfloat16/float32 matmul speedup, measured "
      "once per machine and kept in " + speedup_cache_path() + ".")
  parser.add_argument("--remeasure", action="store_true",
                      help="measure the bfloat16 speedup again and keep the "
                      "new figure (for instance after a measurement taken "
                      "while the machine was busy)")
  args = parser.parse_args(argv)
  device = describe_device(remeasure=args.remeasure)
  print(f"machine: {machine_line(device)}")
  choice = choose(AUTO, device)
  if device.bfloat16_speedup is not None:
    print(f"bfloat16 matmul speedup: {device.bfloat16_speedup}x "
          f"(auto needs {MIN_BFLOAT16_SPEEDUP}x; measured {device.measured})")
  print(f"auto precision: {choice.precision} ({choice.reason})")
  if choice.onednn:
    print(f"kernels: {choice.onednn}")
  int8 = int8_support(device)
  layout = ", weights first" if int8.weights_first else ""
  print(f"int8 decoding: {'available' if int8.available else 'unavailable'} "
        f"({int8.reason}{layout})")


if __name__ == "__main__":
  main()
