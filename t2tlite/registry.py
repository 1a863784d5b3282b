"""One small generic registry, reused for problems, hparams sets and models.

Also loads user plugins: a `--t2t_usr_dir` folder, or any installed package that
declares modules in the entry-point group `t2tlite.plugins`.
"""
import difflib
import importlib
import importlib.metadata
import importlib.util
import os
import sys


class RegistryError(KeyError):
  """A name was registered twice, or looked up and not found."""

  def __str__(self):  # KeyError would quote the message; show it plainly.
    return str(self.args[0])


class Registry:
  """A name -> object map that refuses duplicates and suggests close names.

  Args:
    kind: what is registered, used in error messages ("problem", "hparams set").
  """

  def __init__(self, kind):
    self.kind = kind
    self._entries = {}

  def register(self, name=None):
    """Decorator: `@registry.register()` or `@registry.register("name")`.

    Without a name, the object's `__name__` is used (tensor2tensor turns class
    names into snake_case; we ask plugin authors to name things directly, which
    avoids surprises such as `TranslateEnDeWmt` -> `translate_en_de_wmt`).
    """

    def decorator(obj):
      self.add(name or obj.__name__, obj)
      return obj

    return decorator

  def add(self, name, obj):
    if name in self._entries:
      raise RegistryError(
          f"{self.kind} '{name}' is already registered "
          f"(by {_describe(self._entries[name])}); pick another name.")
    self._entries[name] = obj

  def get(self, name):
    try:
      return self._entries[name]
    except KeyError:
      raise RegistryError(self.unknown_message(name)) from None

  def unknown_message(self, name):
    close = difflib.get_close_matches(name, self._entries, n=5, cutoff=0.5)
    hint = (f" Did you mean: {', '.join(close)}?" if close else
            f" Registered: {', '.join(sorted(self._entries)) or '(none)'}.")
    return f"Unknown {self.kind} '{name}'.{hint}"

  def __contains__(self, name):
    return name in self._entries

  def names(self):
    return sorted(self._entries)


def _describe(obj):
  return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"


problems = Registry("problem")
hparams_sets = Registry("hparams set")
models = Registry("model")

PLUGIN_ENTRY_POINT_GROUP = "t2tlite.plugins"
_loaded_usr_dirs = set()


def import_usr_dir(usr_dir):
  """Imports a plugin folder whose `__init__.py` imports its registering modules.

  Importing the same folder twice is a no-op (its registrations would clash).

  Raises:
    FileNotFoundError: the folder or its `__init__.py` is missing.
  """
  path = os.path.abspath(os.path.expanduser(usr_dir))
  if path in _loaded_usr_dirs:
    return
  init = os.path.join(path, "__init__.py")
  if not os.path.isfile(init):
    raise FileNotFoundError(
        f"--t2t_usr_dir={usr_dir}: expected a folder with an __init__.py that "
        f"imports the modules registering your problems and hparams sets; "
        f"{init} does not exist.")
  module_name = "t2t_usr_" + os.path.basename(path).replace("-", "_")
  spec = importlib.util.spec_from_file_location(
      module_name, init, submodule_search_locations=[path])
  module = importlib.util.module_from_spec(spec)
  sys.modules[module_name] = module
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[module_name]
    raise
  _loaded_usr_dirs.add(path)


_entry_points_loaded = False


def load_entry_point_plugins():
  """Imports every module listed under the `t2tlite.plugins` entry-point group."""
  global _entry_points_loaded
  if _entry_points_loaded:
    return
  _entry_points_loaded = True
  for entry_point in importlib.metadata.entry_points(
      group=PLUGIN_ENTRY_POINT_GROUP):
    entry_point.load()
