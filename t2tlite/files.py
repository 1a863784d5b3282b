"""Small file helpers shared by the library and the commands."""
import contextlib
import os
import shutil
import threading

# Environment variable naming t2tlite's cache folder (the measured bfloat16
# speedup, XLA's compiled searches); default $XDG_CACHE_HOME/t2tlite, or
# ~/.cache/t2tlite.
CACHE_DIR_ENV = "T2TLITE_CACHE_DIR"


def cache_folder():
  """t2tlite's cache folder: $T2TLITE_CACHE_DIR, else
  $XDG_CACHE_HOME/t2tlite, else ~/.cache/t2tlite (not created here); an
  absolute path, since the processes a command starts are told it."""
  return os.path.abspath(os.path.expanduser(
      os.environ.get(CACHE_DIR_ENV) or os.path.join(
          os.environ.get("XDG_CACHE_HOME") or "~/.cache", "t2tlite")))


def _temporary_name(path):
  """A name beside `path` that no other process or thread writing `path`
  at the same time uses (t2t-serve's threads share one process)."""
  return f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"


def atomic_write_text(path, text):
  """Writes `text` to `path` via a temporary file and a rename, so that a
  reader never sees a half-written file (`path` may be any tf.io.gfile URL)."""
  import tensorflow as tf  # only writers need it; t2t-bleu never loads it
  tmp = _temporary_name(path)
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(text)
  tf.io.gfile.rename(tmp, path, overwrite=True)


@contextlib.contextmanager
def _replaced_whole(path):
  """Yields a temporary name beside the local `path` for the block to
  write; renames it to `path` after the block, or removes it if the block
  or the rename fails."""
  tmp = _temporary_name(path)
  try:
    yield tmp
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def atomic_write_bytes(path, data):
  """Writes `data` to a local `path` under a temporary name, then renames
  it (a temporary left by a failed write is removed)."""
  with _replaced_whole(path) as tmp, open(tmp, "wb") as f:
    f.write(data)


def atomic_copy(source, destination):
  """Copies a local file under a temporary name, then renames it (a
  temporary left by a failed copy is removed)."""
  with _replaced_whole(destination) as tmp:
    shutil.copyfile(source, tmp)


def read_lines(path):
  """Lines of a UTF-8 text file without their line ends.

  Raises:
    FileNotFoundError / ValueError: the message starts with `path`.
  """
  try:
    with open(path, encoding="utf-8") as f:
      return f.read().splitlines()
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: no such file") from None
  except UnicodeDecodeError as error:
    raise ValueError(f"{path}: not UTF-8 text ({error})") from None


def split_ensemble(value, flag):
  """The members a comma-separated `value` of flag `flag` names (user
  paths expanded), or None when it names one model.

  Raises:
    ValueError: an empty name between commas.
  """
  value = value or ""
  if "," not in value:
    return None
  paths = [os.path.expanduser(p.strip()) for p in value.split(",")]
  if not all(paths):
    raise ValueError(f"--{flag}={value}: an empty name between commas "
                     "(expected A,B,... checkpoints or run folders)")
  return paths
