"""The flags each t2tlite command defines, read in one fresh process.

    python tests/support/command_flags.py t2tlite.bin.t2t_decoder ...

imports each command module in turn and prints one JSON object,
{module: [flag, ...]}: the flags t2tlite's modules define for that command
(its own and those of the shared flag modules it imports), and absl's own
(--verbosity, --helpfull, ...), which every command accepts. Two commands
may define a flag of the same name (t2t-bleu's and t2t-parse-eval's
--reference), which absl allows once per process, so after each command its
t2tlite.bin modules and their flags are removed before the next is
imported. Nothing is parsed or run: importing a command defines its flags.
"""
import contextlib
import importlib
import json
import sys

from absl import flags
from absl.testing import flagsaver

import t2tlite.bin

# Flags absl's parser and app.run accept in every program.
ABSL_FLAGS = {"help", "helpshort", "helpfull", "helpxml", "h", "?",
              "flagfile", "undefok", "only_check_args"}


def _forget_command_modules(before):
  """Removes the t2tlite.bin submodules imported since `before` (a set of
  module names), so that the next import runs their flag definitions
  again."""
  for name in [n for n in sys.modules
               if n.startswith("t2tlite.bin.") and n not in before]:
    del sys.modules[name]
    attribute = name.rsplit(".", 1)[1]
    if hasattr(t2tlite.bin, attribute):
      delattr(t2tlite.bin, attribute)


@contextlib.contextmanager
def command_module(name, **flag_values):
  """Yields command module `name` imported in this process, its flags
  parsed at their defaults but for `flag_values`; then removes the flags
  it defined and forgets it, so that a later import of any command defines
  its flags again."""
  modules_before, flags_before = set(sys.modules), set(flags.FLAGS)
  was_parsed = flags.FLAGS.is_parsed()
  try:
    module = importlib.import_module(name)
    if not was_parsed:
      flags.FLAGS.mark_as_parsed()
    with flagsaver.flagsaver(**flag_values):
      yield module
  finally:
    if not was_parsed:
      flags.FLAGS.unparse_flags()
    for flag in set(flags.FLAGS) - flags_before:
      delattr(flags.FLAGS, flag)
    _forget_command_modules(modules_before)


def command_flags(modules):
  """{module: sorted flag names it accepts} for each module name given."""
  absl_own = set(flags.FLAGS) | ABSL_FLAGS
  modules_before = set(sys.modules)
  result = {}
  for module in modules:
    flags_before = set(flags.FLAGS)
    importlib.import_module(module)
    added = set(flags.FLAGS) - flags_before
    own = {name for name in added
           if (flags.FLAGS.find_module_defining_flag(name) or ""
               ).startswith("t2tlite")}
    result[module] = sorted(own | absl_own)
    for name in added:
      delattr(flags.FLAGS, name)
    _forget_command_modules(modules_before)
  return result


if __name__ == "__main__":
  print(json.dumps(command_flags(sys.argv[1:])))
