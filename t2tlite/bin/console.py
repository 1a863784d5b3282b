"""Running a t2tlite/bin module as a console script with a useful --help.

absl's --help lists the flags of the main module, which it finds by
sys.argv[0]; for a console script that is the generated wrapper, which defines
no flags, so --help would list none. `run` registers the module's key flags
(its own and the ones it adopted) under sys.argv[0], and shows the module's
docstring as the usage text.
"""
import sys

from absl import app
from absl import flags


def run(main_fn, module_name):
  """`app.run(main_fn)`, with --help documenting `module_name`'s flags."""
  flag_values = flags.FLAGS
  for flag in flag_values.get_key_flags_for_module(module_name):
    flag_values.register_key_flag_for_module(sys.argv[0], flag)
  main_module = sys.modules["__main__"]
  if not main_module.__doc__:
    main_module.__doc__ = sys.modules[module_name].__doc__
  app.run(main_fn)
