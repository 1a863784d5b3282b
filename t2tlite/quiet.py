"""Quiet start-up for the commands (the t2t-* commands, through
`t2tlite.bin`, and `python -m t2tlite.precision`): TensorFlow's native
notices are hidden unless the user asks for logs. Library code never calls
`install`: it leaves logging as the user configured it.

TensorFlow's shared libraries log from static initializers while they load
(oneDNN and CUDA-driver notices, the CPU-feature notice, absl's "All log
messages before absl::InitializeLog()" warning, once per library), before any
setting is read: TF_CPP_MIN_LOG_LEVEL does not reach them. So the import of
tensorflow runs with file descriptor 2 redirected to a temporary file;
afterwards every line that is not one of those notices is written to stderr,
so anything else printed meanwhile still shows. TF_CPP_MIN_LOG_LEVEL=3 then
keeps later native log lines out: the cuInit failure of a machine without
GPUs and oneDNN's fallback notices are logged as errors, and a native error
that matters reaches the command as a Python exception with its message
anyway. Finally, Python INFO records logged from inside the tensorflow and
keras packages (checkpoint sharding timings, SavedModel input renames,
"Assets written to") are dropped: the commands log their own progress at INFO
through absl, whose handler would print those too.

Nothing changes when the user sets TF_CPP_MIN_LOG_LEVEL or passes absl's
--verbosity (-v). The TF_CPP_MIN_LOG_LEVEL that `install` sets itself is
marked (T2TLITE_QUIET_SET), so a process a command starts (a worker, a
server, a test's command) is quiet too rather than taking it for the user's.
"""
import contextlib
import importlib.util
import logging
import os
import re
import sys
import tempfile

from absl import logging as absl_logging

from t2tlite import import_hooks

_NOTICE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called "
    r"are written to STDERR"
    # native INFO/WARNING lines, as
    # I0000 00:00:1795433238.790204  5997 port.cc:153] oneDNN custom ...
    r"|[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] .*"
    r"|To enable the following instructions: .* rebuild TensorFlow with the "
    r"appropriate compiler flags\.")


_LIBRARIES = ("tensorflow", "keras", "tensorflow_text")
_OWN_LEVEL = "3"
_MARK = "T2TLITE_QUIET_SET"


def _package_dirs(names):
  """The folders of the named packages (found, not imported)."""
  dirs = []
  for name in names:
    spec = importlib.util.find_spec(name)
    for folder in (spec.submodule_search_locations or []) if spec else []:
      dirs.append(os.path.join(os.path.realpath(folder), ""))
  return tuple(dirs)


class _DropLibraryInfo(logging.Filter):
  """Drops INFO (and lower) records logged from inside given folders."""

  def __init__(self, dirs):
    super().__init__()
    self._dirs = dirs

  def filter(self, record):
    return record.levelno >= logging.WARNING or not os.path.realpath(
        record.pathname).startswith(self._dirs)


def user_wants_logs(argv=None, environ=None):
  """Whether the user set TF_CPP_MIN_LOG_LEVEL or passed --verbosity/-v."""
  environ = os.environ if environ is None else environ
  level = environ.get("TF_CPP_MIN_LOG_LEVEL")
  if level is not None and not (level == _OWN_LEVEL and
                                environ.get(_MARK) == _OWN_LEVEL):
    return True
  for arg in (sys.argv if argv is None else argv)[1:]:
    if arg == "--":
      break
    if arg.startswith("-") and arg.lstrip("-").split("=")[0] in ("v",
                                                                 "verbosity"):
      return True
  return False


def is_notice(line):
  """Whether a stderr line is one of TensorFlow's start-up notices."""
  return bool(_NOTICE.fullmatch(line.rstrip("\r\n")))


@contextlib.contextmanager
def filtered_stderr():
  """Runs the block with fd 2 captured; then writes the captured lines that
  are not start-up notices to stderr."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as capture:
    os.dup2(capture.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      capture.seek(0)
      text = capture.read().decode("utf-8", "replace")
      kept = [line for line in text.splitlines(keepends=True)
              if not is_notice(line)]
      sys.stderr.write("".join(kept))
      sys.stderr.flush()


def install():
  """Makes the first `import tensorflow` quiet, unless the user asked for
  logs (see the module docstring). Call before tensorflow is imported."""
  if user_wants_logs() or "tensorflow" in sys.modules:
    return
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = _OWN_LEVEL
  os.environ[_MARK] = _OWN_LEVEL
  drop_library_info = _DropLibraryInfo(_package_dirs(_LIBRARIES))
  absl_logging.get_absl_handler().addFilter(drop_library_info)
  # TensorFlow's own logger may print through a handler of its own.
  logging.getLogger("tensorflow").addFilter(drop_library_info)
  import_hooks.around_first_import(("tensorflow",), filtered_stderr)
