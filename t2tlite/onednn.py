"""oneDNN on by default on every x86 CPU, set before TensorFlow loads.

TensorFlow 2.21 turns its oneDNN path on by default only on CPUs with
AVX512_VNNI, AVX512_BF16 or AMX. Elsewhere (an AVX2-only CPU such as AMD
Zen 3) every op runs TensorFlow's own Eigen kernels: decoding and training
ran at about half the speed there (`docs/cpu_and_precision.md`), and the
int8 search's kernel, which exists only on the oneDNN path, is missing.
TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, when it loads, so
`t2tlite/__init__.py` calls `set_default` before anything imports
tensorflow: every command and every library user that imports t2tlite first
gets oneDNN, unless they set TF_ENABLE_ONEDNN_OPTS themselves.

This module imports no TensorFlow (it must run before it).
"""
import dataclasses
import os
import platform
import sys

ENV = "TF_ENABLE_ONEDNN_OPTS"
# Set beside ENV when t2tlite chose its value, so that the processes a
# command starts (which inherit both) say why too.
MARK_ENV = "T2TLITE_SET_ONEDNN_OPTS"
X86_MACHINES = ("x86_64", "amd64", "i386", "i686")

BY_T2TLITE = "default set by t2tlite"
BY_USER = "set by the user"
TF_FIRST = "tensorflow imported before t2tlite"
NOT_X86 = "TensorFlow's default (not an x86 CPU)"


@dataclasses.dataclass(frozen=True)
class Setting:
  """How TF_ENABLE_ONEDNN_OPTS came to be what TensorFlow read.

  Attributes:
    value: the variable as TensorFlow read it (None: unset).
    source: BY_T2TLITE, BY_USER, TF_FIRST or NOT_X86.
  """
  value: str | None
  source: str


def decide(environ, tensorflow_loaded, machine):
  """The setting for a process (pure: changes nothing).

  Args:
    environ: the environment ({name: value}).
    tensorflow_loaded: whether tensorflow was imported already.
    machine: platform.machine() ("x86_64", "aarch64").
  Returns:
    (Setting, the value to set or None to leave the environment alone).
  """
  value = environ.get(ENV)
  if value is not None:  # what TensorFlow read, or will read
    by_us = environ.get(MARK_ENV) == value
    return Setting(value, BY_T2TLITE if by_us else BY_USER), None
  if tensorflow_loaded:
    return Setting(None, TF_FIRST), None
  if machine.lower() not in X86_MACHINES:
    return Setting(None, NOT_X86), None
  return Setting("1", BY_T2TLITE), "1"


_setting = None


def set_default():
  """Sets TF_ENABLE_ONEDNN_OPTS=1 on x86 unless the user set it or
  tensorflow is loaded already; remembers why (`setting`). Called once, by
  `t2tlite/__init__.py`."""
  global _setting
  _setting, value = decide(os.environ, "tensorflow" in sys.modules,
                           platform.machine())
  if value is not None:
    os.environ[ENV] = value
    os.environ[MARK_ENV] = value
  return _setting


def setting():
  """The Setting of this process (`set_default`'s)."""
  return _setting or Setting(os.environ.get(ENV), BY_USER)


def enabled():
  """Whether TensorFlow's oneDNN path is on in this process (imports
  tensorflow)."""
  import tensorflow  # noqa: F401  (loads the library IsMklEnabled asks)
  from tensorflow.python.util import _pywrap_util_port
  return bool(_pywrap_util_port.IsMklEnabled())


def describe(is_enabled, current=None):
  """One phrase for the log: "oneDNN on (default set by t2tlite)", or why
  it is off and how to turn it on."""
  current = current or setting()
  if is_enabled:
    return f"oneDNN on ({current.source})"
  if current.source == TF_FIRST:
    return (f"oneDNN off ({TF_FIRST}, which left it off on this CPU; set "
            f"{ENV}=1 before Python starts, or import t2tlite first)")
  how = f"{ENV}={current.value}" if current.value is not None else "unset"
  return f"oneDNN off ({how}, {current.source})"
