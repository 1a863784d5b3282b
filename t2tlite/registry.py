"""One small generic registry, reused for problems, hparams sets and models.

Each kind's naming rules live in hooks given to its `Registry` (see the
`problems` registry: reserved suffixes and derived variant names), so every
kind shares one lookup and one "did you mean" message. The built-in entries of
a kind load on first use, so that reading a registry does not import
TensorFlow unless the entries need it.

Also loads user plugins: a `--t2t_usr_dir` folder, or any installed package that
declares modules in the entry-point group `t2tlite.plugins`.
"""
import difflib
import functools
import importlib
import importlib.metadata
import importlib.util
import os
import sys


class RegistryError(KeyError):
  """A name was registered twice, or looked up and not found."""

  def __str__(self):  # KeyError would quote the message; show it plainly.
    return str(self.args[0])


def did_you_mean(name, candidates, n=5):
  """" Did you mean: a, b?" naming the candidates close to `name`, or ""."""
  close = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)
  return f" Did you mean: {', '.join(close)}?" if close else ""


class Registry:
  """A name -> object map that refuses duplicates and suggests close names.

  Args:
    kind: what is registered, used in error messages ("problem", "hparams set").
    check_name: optional `(name) -> None` hook that raises ValueError for a
      name this kind does not accept.
    variants: optional `(name, obj) -> {variant_name: obj}` hook: other names
      under which a registered entry can be looked up (not listed by
      `names()`, but offered as close matches).
    variants_note: how `variants` names are formed, for error messages.
    builtins: optional module name that registers the built-in entries;
      imported on the first use of the registry.
  """

  def __init__(self, kind, check_name=None, variants=None, variants_note="",
               builtins=None):
    self.kind = kind
    self._entries = {}
    self._check_name = check_name
    self._variants = variants or (lambda name, obj: {})
    self._variants_note = variants_note
    self._builtins = builtins

  def _load_builtins(self):
    if self._builtins:
      # Cleared first: the module's registrations call back into this.
      module, self._builtins = self._builtins, None
      importlib.import_module(module)

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
    """Registers `obj` as `name`.

    Raises:
      RegistryError: the name is taken.
      ValueError: the name breaks this kind's naming rules.
    """
    self._load_builtins()
    if self._check_name:
      self._check_name(name)
    if name in self._entries:
      raise RegistryError(
          f"{self.kind} '{name}' is already registered "
          f"(by {_describe(self._entries[name])}); pick another name.")
    self._entries[name] = obj

  def get(self, name):
    """The object registered as `name`, or under a variant name of an entry.

    Raises:
      RegistryError: unknown name; the message lists close names.
    """
    self._load_builtins()
    if name in self._entries:
      return self._entries[name]
    variants = self._all_variants()
    if name in variants:
      return variants[name]
    raise RegistryError(self.unknown_message(name))

  def _all_variants(self):
    return {variant: obj for entry, value in self._entries.items()
            for variant, obj in self._variants(entry, value).items()}

  def unknown_message(self, name):
    known = self.names()
    hint = did_you_mean(name, known + sorted(self._all_variants()))
    if not hint:
      note = f" ({self._variants_note})" if self._variants_note else ""
      hint = f" Registered: {', '.join(known) or '(none)'}{note}."
    return f"Unknown {self.kind} '{name}'.{hint}"

  def __contains__(self, name):
    self._load_builtins()
    return name in self._entries

  def names(self):
    """The registered names (not their variants), sorted."""
    self._load_builtins()
    return sorted(self._entries)


def _describe(obj):
  module = getattr(obj, "__module__", "?")
  return f"{module}.{getattr(obj, '__qualname__', obj)}"


# Problem names: NAME_rev is NAME with inputs and targets swapped, so that
# suffix is derived by the registry and refused as a registered name.
REVERSE_SUFFIX = "_rev"


def _check_problem_name(name):
  if name.endswith(REVERSE_SUFFIX):
    raise ValueError(f"Problem name '{name}': the suffix {REVERSE_SUFFIX} is "
                     f"reserved for reversed variants, pick another name.")


def _reversed_problem(name, problem_class):
  return {name + REVERSE_SUFFIX: functools.partial(problem_class,
                                                   reverse=True)}


def make_problem_registry(builtins="t2tlite.problems"):
  """A registry of problems with their naming rules (an empty one, for
  tests, with builtins=None)."""
  return Registry("problem", check_name=_check_problem_name,
                  variants=_reversed_problem,
                  variants_note=f"each also as NAME{REVERSE_SUFFIX}",
                  builtins=builtins)


problems = make_problem_registry()
hparams_sets = Registry("hparams set", builtins="t2tlite.hparams")
# Keras model classes with `from_hparams(hp, vocab_size, **kwargs)` and
# `build_by_calling()`; see t2tlite.models.build_registered_model.
models = Registry("model", builtins="t2tlite.models.transformer")

PLUGIN_ENTRY_POINT_GROUP = "t2tlite.plugins"
_loaded_usr_dirs = set()


def import_usr_dir(usr_dir):
  """Imports a plugin folder whose `__init__.py` imports its registering
  modules.

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
        f"{usr_dir}: expected a plugin folder with an __init__.py that "
        f"imports the modules registering your problems and hparams sets; "
        f"{init} does not exist.")
  module_name = _usr_module_name(path)
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


def _usr_module_name(path):
  """The module name of the plugin folder `path`: t2t_usr_ and its last
  name, numbered when another folder of that name was imported (its
  modules must not stand in for this folder's)."""
  base = "t2t_usr_" + os.path.basename(path).replace("-", "_")
  name, number = base, 1
  while getattr(sys.modules.get(name), "__path__", [path]) != [path]:
    number += 1
    name = f"{base}_{number}"
  return name


_entry_points_loaded = False


def load_entry_point_plugins():
  """Imports every module listed under the `t2tlite.plugins` entry-point
  group."""
  global _entry_points_loaded
  if _entry_points_loaded:
    return
  _entry_points_loaded = True
  for entry_point in importlib.metadata.entry_points(
      group=PLUGIN_ENTRY_POINT_GROUP):
    entry_point.load()
