"""The import structure of t2tlite: each module imports only its own package
and the packages of lower ranks, read from the source (ast), not by running
it.

The ranks, lowest first; packages on one rank are independent of each other:

  0  base      t2tlite.files, .ids (PAD/EOS/UNK), .registry, .hparams_lib,
               .hardware (the machine's description), .bfloat16_check (its
               measured bfloat16 speedup), .onednn and .precision (the
               machine's policies: oneDNN, float32/bfloat16, int8), .quiet,
               .lean_start and .heap (the commands' quiet, lighter TensorFlow
               start-up, through .import_hooks, and their C heap),
               .xla_cache, .graph_options and .graph_functions (the graphs'
               compiled programs, Grappler's options, the functions a
               node calls)
  1  data      t2tlite.data (vocabularies, records, datagen, trees)
     layers    t2tlite.layers (Keras layers of the Transformer)
  2  models    t2tlite.models (the Transformer and its config)
     evaluate  t2tlite.evaluate (BLEU and bracket F1 of texts)
  3  decode    t2tlite.decode (searches, constraints, batched decoding)
  4  problems  t2tlite.problem (the base class), t2tlite.problems
               (the registered ones, from problems/; parsing's decoding
               constraint is a t2tlite.decode one) and t2tlite.mixture
               (several problems as one)
  5  run_dir   t2tlite.run_dir (a training folder and its model)
     problem_decoding  t2tlite.problem_decoding (a problem's decode
               defaults and constraint, by name)
  6  run_decoding  t2tlite.run_decoding (a run folder, checkpoint or
               ensemble to a Decoder: the one road)
  7  train, export
  8  serve, report (t2t-serve's app and t2t-report's page, over runs and
               exports)
  9  bin       the commands (the only readers of absl flags), and the
               `t2tlite` package itself (its __init__ is the public facade)

The registered hparams sets (hparams/, installed as t2tlite.hparams) sit on
rank 1: they only build HParams.

Also read from the source: the layers, the model and the search load no
tokenizer library, and no module under tests/ imports a test module.
"""
import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# Folders of the repository and the package name each is installed as
# (setup.py's package_dir).
SOURCE_FOLDERS = {"t2tlite": "t2tlite", "problems": "t2tlite.problems",
                  "hparams": "t2tlite.hparams"}

RANKS = [
    {"base": ("t2tlite.files", "t2tlite.ids", "t2tlite.registry",
              "t2tlite.hparams_lib", "t2tlite.hardware",
              "t2tlite.bfloat16_check", "t2tlite.onednn",
              "t2tlite.precision", "t2tlite.quiet", "t2tlite.lean_start",
              "t2tlite.heap", "t2tlite.import_hooks", "t2tlite.xla_cache",
              "t2tlite.graph_options", "t2tlite.graph_functions")},
    {"data": ("t2tlite.data",), "layers": ("t2tlite.layers",),
     "hparams": ("t2tlite.hparams",)},
    {"models": ("t2tlite.models",), "evaluate": ("t2tlite.evaluate",)},
    {"decode": ("t2tlite.decode",)},
    {"problems": ("t2tlite.problem", "t2tlite.problems", "t2tlite.mixture")},
    {"run_dir": ("t2tlite.run_dir",),
     "problem_decoding": ("t2tlite.problem_decoding",)},
    {"run_decoding": ("t2tlite.run_decoding",)},
    {"train": ("t2tlite.train",),
     "export": ("t2tlite.export",)},
    {"serve": ("t2tlite.serve",), "report": ("t2tlite.report",)},
    {"bin": ("t2tlite.bin",), "package": ("t2tlite",)},
]

# Known exceptions, (importing module, imported module). Each entry must
# still exist, so that a fixed one is dropped from here.
ALLOWED = set()

# Third-party modules the layers, the model and the search must not load:
# only vocabularies need them.
HEAVY = ("sentencepiece", "tensorflow_text")


def _modules():
  """{module name: path} of every .py file under SOURCE_FOLDERS."""
  modules = {}
  for folder, package in SOURCE_FOLDERS.items():
    root = os.path.join(REPO, folder)
    for dirpath, _, filenames in os.walk(root):
      for filename in filenames:
        if not filename.endswith(".py"):
          continue
        path = os.path.join(dirpath, filename)
        parts = os.path.relpath(path, root)[:-len(".py")].split(os.sep)
        if parts[-1] == "__init__":
          parts = parts[:-1]
        modules[".".join([package] + parts)] = path
  return modules


MODULES = _modules()


def _imports(name, path, top_level_only=False):
  """[(line, imported module)] of every import in the file, at any depth
  (function-level imports included) unless top_level_only; `from p import m`
  counts as p.m when p.m is a module, and a command's lazy import
  (`lazy.module("p.m")`, t2tlite.bin.lazy) as an import of p.m."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  is_package = path.endswith("__init__.py")
  found = []
  for node in tree.body if top_level_only else ast.walk(tree):
    if isinstance(node, ast.Import):
      found += [(node.lineno, alias.name) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        package = name.split(".")
        package = package[:len(package) - node.level + is_package]
        base = ".".join(package + ([base] if base else []))
      for alias in node.names:
        full = f"{base}.{alias.name}"
        found.append((node.lineno, full if full in MODULES else base))
    elif _is_lazy_import(node):
      found.append((node.lineno, node.value.args[0].value))
  return found


def _is_lazy_import(node):
  """`NAME = lazy.module("a.b")` (at any depth, as ast.walk yields it)."""
  if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
    return False
  call = node.value
  return (isinstance(call.func, ast.Attribute) and call.func.attr == "module"
          and isinstance(call.func.value, ast.Name)
          and call.func.value.id == "lazy" and len(call.args) == 1
          and isinstance(call.args[0], ast.Constant))


def _place(module):
  """(rank, package name) of a t2tlite module: its longest prefix in RANKS."""
  best = None
  for rank, packages in enumerate(RANKS):
    for package, prefixes in packages.items():
      for prefix in prefixes:
        if module == prefix or module.startswith(prefix + "."):
          if best is None or len(prefix) > best[2]:
            best = (rank, package, len(prefix))
  return None if best is None else best[:2]


def _edges():
  """(importing module, path, line, imported t2tlite module)."""
  return [(name, path, line, target)
          for name, path in sorted(MODULES.items())
          for line, target in _imports(name, path)
          if target == "t2tlite" or target.startswith("t2tlite.")]


def test_every_module_has_a_rank():
  unplaced = sorted(name for name in MODULES if _place(name) is None)
  assert not unplaced, (
      f"modules in no rank of {__name__}.RANKS (add their package): "
      f"{unplaced}")


def test_lazy_imports_count_as_imports():
  targets = [target for _, target in _imports(
      "t2tlite.bin.t2t_trainer", MODULES["t2tlite.bin.t2t_trainer"])]
  assert "t2tlite.train.trainer" in targets  # lazy.module(...) in the command


def test_imports_go_only_to_lower_ranks():
  wrong, used = [], set()
  for name, path, line, target in _edges():
    (rank, package), (target_rank, target_package) = (
        _place(name), _place(target))
    if package == target_package or target_rank < rank:
      continue
    if (name, target) in ALLOWED:
      used.add((name, target))
      continue
    direction = "up" if target_rank > rank else "sideways"
    wrong.append(f"{os.path.relpath(path, REPO)}:{line}: {package} (rank "
                 f"{rank}) imports {target} ({target_package}, rank "
                 f"{target_rank}): {direction}")
  assert not wrong, "imports against the layering:\n" + "\n".join(wrong)
  assert used == ALLOWED, (
      f"ALLOWED holds imports that no longer exist; drop them: "
      f"{sorted(ALLOWED - used)}")


def _closure(start):
  """Every module reached from `start` through imports at a module's top
  level (the ones that run when it is imported), and the third-party
  top-level names they import."""
  seen, external, todo = set(), set(), [start]
  while todo:
    name = todo.pop()
    if name in seen:
      continue
    seen.add(name)
    for _, target in _imports(name, MODULES[name], top_level_only=True):
      if target in MODULES:
        # Importing a.b.c runs the __init__ of a and a.b too.
        parts = target.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts) + 1)
                 if ".".join(parts[:i]) in MODULES]
      else:
        external.add(target.split(".")[0])
  return seen, external


@pytest.mark.parametrize("module", [
    "t2tlite.layers.attention", "t2tlite.layers.word_pointer",
    "t2tlite.models.transformer", "t2tlite.decode.beam_search",
    "t2tlite.decode.search", "t2tlite.decode.decoding"])
def test_model_and_search_load_no_tokenizer(module):
  reached, external = _closure(module)
  assert not external & set(HEAVY), (
      f"importing {module} loads {sorted(external & set(HEAVY))}, through "
      f"{sorted(m for m in reached if m.startswith('t2tlite.data'))}")


def test_no_test_module_imports_another():
  """Shared test code lives in tests/support (on sys.path, pytest.ini); a
  test module imported by another would run its tests' imports and
  fixtures in the importer, and could not move on its own."""
  tests = os.path.join(REPO, "tests")
  test_modules = set()
  sources = []
  for dirpath, _, filenames in os.walk(tests):
    for filename in filenames:
      if filename.endswith(".py"):
        sources.append(os.path.join(dirpath, filename))
        if filename.startswith("test_") or filename == "conftest.py":
          test_modules.add(filename[:-len(".py")])
  wrong = []
  for path in sorted(sources):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""] + [alias.name for alias in node.names]
      else:
        continue
      for name in names:
        parts = name.split(".")
        if parts[0] == "tests" or set(parts) & test_modules:
          wrong.append(f"{os.path.relpath(path, REPO)}:{node.lineno}: "
                       f"imports {name}")
  assert not wrong, "test modules imported:\n" + "\n".join(wrong)
