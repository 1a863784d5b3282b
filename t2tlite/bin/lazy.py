"""Modules a command loads when first used, not when it starts.

A command module names the modules that import TensorFlow with `module()`,
so `--help`, a misspelt flag or a missing required flag answer in a fraction
of a second instead of after TensorFlow's start-up (about 4 s of CPU). The
module runs at the first attribute read (Python's `importlib.util.
LazyLoader`), which every command does only after its flags are parsed;
`tests/end_to_end/test_commands.py` checks that --help loads no TensorFlow.
"""
import importlib
import importlib.util
import sys


def module(name):
  """The module `name`, executed at its first attribute read.

  Args:
    name: a full module name, such as "t2tlite.problem".
  Returns:
    the module (already loaded, if something imported it before).
  Raises:
    ModuleNotFoundError: no module `name` (at once, as `import` would).
  """
  if name in sys.modules:
    return sys.modules[name]
  spec = importlib.util.find_spec(name)
  if spec is None:
    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
  loader = importlib.util.LazyLoader(spec.loader)
  spec.loader = loader
  loaded = importlib.util.module_from_spec(spec)
  sys.modules[name] = loaded
  loader.exec_module(loaded)
  parent, _, child = name.rpartition(".")
  if parent:  # as the import system does: `from parent import child` works
    setattr(importlib.import_module(parent), child, loaded)
  return loaded
