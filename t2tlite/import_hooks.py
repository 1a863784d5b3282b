"""Runs the first import of a package inside a context manager: how the
commands start TensorFlow quietly (`t2tlite.quiet`) and without the modules
Keras would import for notebooks and image galleries (`t2tlite.lean_start`).
"""
import importlib.abc
import importlib.util
import sys


class _WrappedLoader(importlib.abc.Loader):
  """Executes a module inside `context()`, then leaves it the real loader."""

  def __init__(self, loader, context):
    self._loader = loader
    self._context = context

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    module.__loader__ = module.__spec__.loader = self._loader
    with self._context():
      self._loader.exec_module(module)


class _FirstImportFinder(importlib.abc.MetaPathFinder):
  """Wraps the loader of the first of `names` imported, then steps aside."""

  def __init__(self, names, context):
    self._names = frozenset(names)
    self._context = context

  def find_spec(self, fullname, path=None, target=None):
    if fullname not in self._names:
      return None
    sys.meta_path.remove(self)
    # The finders after this one (another hook's, then Python's) find it.
    spec = importlib.util.find_spec(fullname)
    if spec is not None and spec.loader is not None:
      spec.loader = _WrappedLoader(spec.loader, self._context)
    return spec


def around_first_import(names, context):
  """Makes the first import of any of the top-level packages `names` run
  inside `context()` (a context manager factory). Nothing happens if one of
  them is imported already. Hooks compose: each wraps what the next finds."""
  if not any(name in sys.modules for name in names):
    sys.meta_path.insert(0, _FirstImportFinder(names, context))
