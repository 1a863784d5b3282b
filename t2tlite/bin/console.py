"""Running a t2tlite/bin module as a console script.

`run` gives every command the same behaviour:

* --help documents the module's flags and exits with status 0. absl lists the
  flags of the main module, which it finds by sys.argv[0]; for a console
  script that is the generated wrapper, which defines none, so `run`
  registers the module's key flags (its own and the ones it adopted) under
  sys.argv[0], and shows the module's docstring as the usage text, with
  the flags under "flags:" (not under absl's header naming the wrapper).
* Log lines are short (`t2tlite.bin.log_lines`): time, level when not
  INFO, component; --verbosity (-v) brings back absl's full prefix.
* A usage error (positional arguments, or an `app.UsageError` the command
  raises: flags that do not go together) is one line, `t2t-NAME: error:
  MESSAGE (--help lists the flags)`, exit code 1, not absl's whole usage.
* Required flags are checked in one place, with one message
  (`--NAME is required: HELP`).
* A leading `~` in the path flags named is expanded (shells leave it alone
  after `--flag=`).
* An expected failure (bad input, a missing file; the `errors` given) prints
  `t2t-NAME: error: MESSAGE` to stderr and exits with code 1, without a
  traceback; anything else is a bug and keeps its traceback. Library code
  names its arguments (`output_dir=/x`); MESSAGE names the command's flags
  instead (`--output_dir=/x`).
"""
import os
import re
import sys

from absl import app
from absl import flags

from t2tlite import files
from t2tlite.bin import log_lines
from t2tlite.registry import RegistryError


class CommandError(Exception):
  """A failure a command reports as `NAME: error: MESSAGE` (exit code 1)."""


# DataError is a ValueError; RegistryError a KeyError (an unknown name).
USER_ERRORS = (CommandError, FileNotFoundError, ValueError, RegistryError)
_HELP_FLAGS = ("help", "h", "?", "helpshort", "helpfull", "helpxml")


def command_name(module_name):
  """"t2tlite.bin.t2t_avg_checkpoints" -> "t2t-avg-checkpoints"."""
  return module_name.rsplit(".", 1)[-1].replace("_", "-")


def name_flags(message, flag_names, renamed=None):
  """`message` with library argument names turned into flag names.

  An argument is named in library messages as `name=value`, or as a bare
  `name` containing an underscore; each one that is a flag of the command
  (or a key of `renamed`, {argument: flag}) becomes `--flag`.
  """
  renamed = {**{name: name for name in flag_names}, **(renamed or {})}

  def flag(match):
    name, equals = match.group(1), match.group(2) or ""
    if name not in renamed or ("_" not in name and not equals):
      return match.group(0)
    return f"--{renamed[name]}{equals}"

  # Not after "hparam ": hparams share some names with flags (train_steps).
  return re.sub(r"(?<![\w/.~-])(?<!hparam )([a-z][a-z0-9_]*)"
                r"(?:(=)|(?![\w/-]|\.\w))", flag, message)


def read_flag_lines(flag):
  """Lines of the UTF-8 file named by --`flag` (errors name the flag).

  Raises:
    FileNotFoundError / ValueError: `--flag=PATH: what is wrong`.
  """
  try:
    return files.read_lines(flags.FLAGS[flag].value)
  except (FileNotFoundError, ValueError) as error:
    raise type(error)(f"--{flag}={error}") from None


def _asked_for_help(argv):
  for arg in argv[1:]:
    if arg == "--":
      return False
    if arg.startswith("-") and arg.lstrip("-").split("=")[0] in _HELP_FLAGS:
      return True
  return False


def _usage_without_module_header(usage):
  """absl's `app.usage`, except that --help (shorthelp) lists the flags
  under "flags:" without absl's header line naming the module, which for a
  console script is the wrapper's path (/usr/local/bin/t2t-NAME:)."""

  def short_usage(shorthelp=False, writeto_stdout=False, detailed_error=None,
                  exitcode=None):
    if not shorthelp:
      return usage(shorthelp, writeto_stdout, detailed_error, exitcode)
    out = sys.stdout if writeto_stdout else sys.stderr
    listed = flags.FLAGS.main_module_help()
    # "\n/path/to/t2t-NAME:\n  --flag: ..." -> "  --flag: ..."
    listed = re.sub(r"\A\n?[^\n]*:\n", "", listed)
    out.write(sys.modules["__main__"].__doc__ or "")
    out.write("\nflags:\n\n" + listed + "\n" if listed else "\n")
    if detailed_error is not None:
      out.write(f"\n{detailed_error}\n")
    if exitcode is not None:
      sys.exit(exitcode)
    return None

  return short_usage


def _parse_flags(argv):
  """absl's parsing, except that --help exits with status 0 (absl exits
  with 1 after printing the usage)."""
  try:
    return app.parse_flags_with_usage(argv)
  except SystemExit as exit_:
    if exit_.code == 1 and _asked_for_help(argv):
      raise SystemExit(0) from None
    raise


def _missing(flag_values, required, info_flags):
  if any(flag_values[name].value for name in info_flags):
    return []
  return [name for name in required
          if flag_values[name].value in (None, "", [])]


def run(body, module_name, errors=USER_ERRORS, required=(), path_flags=(),
        info_flags=(), renamed=None):
  """Parses the flags, then runs `body()` as the command `module_name`.

  Args:
    body: callable of no arguments; returns None (success) or an exit code.
    module_name: the command's module (`__name__`), whose flags --help lists.
    errors: exception types reported as `NAME: error: MESSAGE`, exit code 1;
      or a callable returning them, called once the flags are parsed (types
      of modules a command loads lazily: t2tlite.bin.lazy).
    required: names of flags that must be given.
    path_flags: names of string flags holding paths, `~`-expanded.
    info_flags: flags that make the command print information and exit (such
      as --registry_help); when one is set, `required` flags may be missing.
    renamed: {library argument name: flag name} where the two differ, for
      error messages.
  """
  flag_values = flags.FLAGS
  for flag in flag_values.get_key_flags_for_module(module_name):
    flag_values.register_key_flag_for_module(sys.argv[0], flag)
  main_module = sys.modules["__main__"]
  if not main_module.__doc__:
    main_module.__doc__ = sys.modules[module_name].__doc__
  # Under `python -m`, module_name is "__main__"; the spec has the real name.
  spec = getattr(sys.modules[module_name], "__spec__", None)
  name = command_name(spec.name if spec else module_name)

  def fail(message):
    sys.stderr.write(f"{name}: error: {message}\n")
    return 1

  def usage_error(message):
    return fail(f"{message} (--help lists the flags)")

  def main(argv):
    log_lines.install(flag_values["verbosity"].present)
    if len(argv) > 1:
      return usage_error(f"Unexpected arguments: {' '.join(argv[1:])}")
    missing = _missing(flag_values, required, info_flags)
    if missing:
      return fail(f"--{missing[0]} is required: {flag_values[missing[0]].help}")
    for flag in path_flags:
      if flag_values[flag].value:
        flag_values[flag].value = os.path.expanduser(flag_values[flag].value)
    caught = errors() if callable(errors) else errors
    try:
      return body() or 0
    except app.UsageError as error:
      return usage_error(error)
    except caught as error:
      message = name_flags(str(error), flag_values, renamed)
      if (isinstance(error, RegistryError) and message.startswith("Unknown")
          and "t2t_usr_dir" in flag_values):
        message += " Plugins load with --t2t_usr_dir."
      return fail(message)

  if not getattr(app.usage, "without_module_header", False):
    app.usage = _usage_without_module_header(app.usage)
    app.usage.without_module_header = True
  app.run(main, flags_parser=_parse_flags)
