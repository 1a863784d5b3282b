"""What this machine computes with: the CPU (model, the flags oneDNN may
use), GPUs and TensorFlow's oneDNN setting, as a `Device` that
`t2tlite.precision` decides from.

    device = describe_device()   # Device(cpu_model=..., cpu_flags=...,
                                 #        gpus=...)
    machine_line(device)         # "AMD EPYC (family 25 model 17), 2 cores, ..."

On a CPU with a bfloat16 flag and no GPU, `describe_device` adds the
measured bfloat16 matmul speedup (`t2tlite.bfloat16_check`).
"""
import dataclasses
import functools
import os
import platform

from t2tlite import bfloat16_check
from t2tlite import onednn

# CPU flags (as /proc/cpuinfo names them) that mean native bfloat16 matmuls.
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# CPU flags with VNNI instructions (int8 dot products).
CPU_VNNI_FLAGS = ("avx512_vnni", "avx_vnni")
# CPU flags shown in a machine's line: what decides matmul speed.
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
# ONEDNN_MAX_CPU_ISA values below AVX-512: oneDNN then uses no AVX-512
# instructions, whatever the CPU has.
ISA_CAPS_WITHOUT_AVX512 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")


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

  def cpu_vnni_flags(self):
    return [f for f in CPU_VNNI_FLAGS if f in self.cpu_flags]

  def fingerprint_flags(self):
    """The FINGERPRINT_FLAGS this CPU has (and oneDNN may use)."""
    return [f for f in FINGERPRINT_FLAGS if f in self.cpu_flags]

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


def cpuinfo(path="/proc/cpuinfo"):
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


def onednn_may_use_avx512(flags=None, isa_cap=None):
  """Whether oneDNN may use AVX-512 here: the CPU has avx512f and
  ONEDNN_MAX_CPU_ISA does not hold oneDNN below it.

  Args:
    flags: /proc/cpuinfo flag names; default this machine's (read once a
      process: `machine.settle` asks at every request of a server).
    isa_cap: ONEDNN_MAX_CPU_ISA's value; default this process's.
  """
  if flags is None:
    flags = _this_cpus_flags()
  if isa_cap is None:
    isa_cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
  return ("avx512f" in flags and
          isa_cap.upper() not in ISA_CAPS_WITHOUT_AVX512)


@functools.cache
def _this_cpus_flags():
  """/proc/cpuinfo's flags of this machine's first processor."""
  return frozenset(cpuinfo().get("flags", "").split())


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
  `bfloat16_check.speedup_cache_path()`, or measured and kept there when
  that file has none for this machine or `remeasure` is set."""
  info = cpuinfo()
  isa_cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
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
  return bfloat16_check.with_kept_speedup(device, remeasure)


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
