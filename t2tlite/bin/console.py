"""Running a t2tlite/bin module as a console script.

`run` gives every command the same behaviour:

* --help documents the module's flags. absl lists the flags of the main
  module, which it finds by sys.argv[0]; for a console script that is the
  generated wrapper, which defines none, so `run` registers the module's key
  flags (its own and the ones it adopted) under sys.argv[0], and shows the
  module's docstring as the usage text.
* Positional arguments are a usage error.
* A leading `~` in the path flags named is expanded (shells leave it alone
  after `--flag=`).
* An expected failure (bad input, a missing file; the `errors` given) prints
  `t2t-NAME: error: MESSAGE` to stderr and exits with code 1, without a
  traceback; anything else is a bug and keeps its traceback.
"""
import os
import sys

from absl import app
from absl import flags

from t2tlite.registry import RegistryError


class CommandError(Exception):
  """A failure a command reports as `NAME: error: MESSAGE` (exit code 1)."""


# DataError is a ValueError; RegistryError a KeyError (an unknown name).
USER_ERRORS = (CommandError, FileNotFoundError, ValueError, RegistryError)


def command_name(module_name):
  """"t2tlite.bin.t2t_avg_checkpoints" -> "t2t-avg-checkpoints"."""
  return module_name.rsplit(".", 1)[-1].replace("_", "-")


def run(body, module_name, errors=USER_ERRORS, required=(), path_flags=()):
  """Parses the flags, then runs `body()` as the command `module_name`.

  Args:
    body: callable of no arguments; returns None (success) or an exit code.
    module_name: the command's module (`__name__`), whose flags --help lists.
    errors: exception types reported as `NAME: error: MESSAGE`, exit code 1.
    required: names of flags that must be given.
    path_flags: names of string flags holding paths, `~`-expanded.
  """
  flag_values = flags.FLAGS
  for flag in flag_values.get_key_flags_for_module(module_name):
    flag_values.register_key_flag_for_module(sys.argv[0], flag)
  main_module = sys.modules["__main__"]
  if not main_module.__doc__:
    main_module.__doc__ = sys.modules[module_name].__doc__
  flags.mark_flags_as_required(list(required))
  # Under `python -m`, module_name is "__main__"; the spec has the real name.
  spec = getattr(sys.modules[module_name], "__spec__", None)
  name = command_name(spec.name if spec else module_name)

  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    for flag in path_flags:
      if flag_values[flag].value:
        flag_values[flag].value = os.path.expanduser(flag_values[flag].value)
    try:
      return body() or 0
    except errors as error:
      sys.stderr.write(f"{name}: error: {error}\n")
      return 1

  app.run(main)
