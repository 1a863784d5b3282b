"""A folder where XLA keeps the searches it compiled, for later processes.

With decode hparam xla_lines a Decoder compiles its search with XLA, about
3 s for each shape of batch it meets. TensorFlow can keep compiled programs
between processes: TF_XLA_FLAGS's --tf_xla_persistent_cache_directory names
a folder, and each entry there is keyed by the program (its HLO: the
model's shapes, the search's code and settings, the batch's shape), which
TensorFlow compares in full when it loads one. The weights are not in the
program but its arguments. So a changed model, hparams or decode setting
compiles anew, and another checkpoint of the same hparams runs the kept
program on its own weights. TensorFlow writes each entry under a temporary
name and renames it: a reader never sees half an entry.

What the key leaves out is in the folder's name (`folder`): the TensorFlow
version (another XLA may not read the program) and the CPU (XLA compiles for
the instruction sets of the CPU it runs on, so a home folder shared by
machines of other kinds keeps one folder per kind).

The commands call `install` (through t2tlite.bin) before TensorFlow starts,
which sets the flag unless TF_XLA_FLAGS names a folder already (an empty
one turns the cache off). Library code never calls it: a library user sets
TF_XLA_FLAGS. A folder that cannot be made or written is left out:
TensorFlow would fail every compile that it cannot keep.

Imports no TensorFlow (it must run before TensorFlow starts).
"""
import hashlib
import os
import platform
from importlib import metadata

from t2tlite import files, hardware

ENV = "TF_XLA_FLAGS"
FLAG = "--tf_xla_persistent_cache_directory"


def cpu_kind():
  """This CPU as a folder name: the architecture and a hash of the model
  name and the instruction-set flags (`hardware.cpuinfo`'s)."""
  info = hardware.cpuinfo()
  model = info.get("model name") or platform.processor()
  flags = info.get("flags") or info.get("Features", "")
  digest = hashlib.sha256(f"{model}|{flags}".encode()).hexdigest()[:12]
  return f"{platform.machine()}-{digest}"


# The distributions TensorFlow is installed from.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu",
                            "tensorflow-intel", "tf-nightly")


def tensorflow_version():
  """The installed TensorFlow's version, read without importing it, or
  None where no known distribution of it is installed."""
  for name in TENSORFLOW_DISTRIBUTIONS:
    try:
      return metadata.version(name)
    except metadata.PackageNotFoundError:
      continue
  return None


def folder():
  """The cache of this TensorFlow version on this kind of CPU:
  <t2tlite's cache folder>/xla/tf-<version>-<cpu_kind()>, or None where
  the version is unknown (no folder could tell versions apart)."""
  version = tensorflow_version()
  if version is None:
    return None
  return os.path.join(files.cache_folder(), "xla",
                      f"tf-{version}-{cpu_kind()}")


def named_folder(flags):
  """The persistent cache folder a TF_XLA_FLAGS value names ("" for off),
  or None where it names none."""
  for word in flags.split():
    if word == FLAG or word.startswith(FLAG + "="):
      return word.partition("=")[2]
  return None


def install():
  """Points TensorFlow's persistent XLA cache at `folder()` for this
  process and those it starts. Call before TensorFlow runs its first op.

  Returns:
    the folder in use ("" for none): the user's, ours, or "" where ours
    cannot be made or written, or TensorFlow's version is unknown.
  """
  flags = os.environ.get(ENV, "")
  named = named_folder(flags)
  if named is not None:
    return named
  path = folder()
  if path is None or not can_make(path):
    return ""
  os.environ[ENV] = f"{flags} {FLAG}={path}".strip()
  return path


def can_make(path):
  """Whether `path` is a writable folder or could be made as one (its
  nearest existing ancestor is a writable folder). TensorFlow makes it
  when it first keeps a program, so a command that compiles nothing
  leaves no folder behind."""
  path = os.path.abspath(path)  # a relative path's ancestors end at ""
  while not os.path.exists(path):
    parent = os.path.dirname(path)
    if parent == path:
      return False
    path = parent
  return os.path.isdir(path) and os.access(path, os.W_OK)


def in_use():
  """The persistent XLA cache folder TF_XLA_FLAGS names ("" for none)."""
  return named_folder(os.environ.get(ENV, "")) or ""
