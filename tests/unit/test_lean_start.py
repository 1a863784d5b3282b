"""The commands' lighter start (t2tlite.lean_start): the optional packages
TensorFlow and Keras import (notebook display, image galleries and
loading, legacy HDF5 and sparse support) hidden while TensorFlow loads,
importable after."""
import contextlib
import gc
import importlib.machinery
import importlib.util
import json
import logging
import os
import subprocess
import sys
import typing

import pytest

from t2tlite import import_hooks, lean_start, quiet


def test_hidden_modules_raise_import_error_then_import_again():
  # A standard module, out of sys.modules for the test whatever imported it
  # before (tensorflow_datasets imports it).
  name = "wave"
  imported = sys.modules.pop(name, None)
  try:
    with lean_start.hidden([name, "json"]):
      with pytest.raises(ImportError):
        importlib.import_module(name)
      # Imported before: left alone.
      assert importlib.import_module("json") is json
    assert importlib.import_module(name).__name__ == name
  finally:
    sys.modules.pop(name, None)
    if imported is not None:
      sys.modules[name] = imported


# In a fresh process: which of the hidden modules TensorFlow's import loaded
# (after `start`), whether pyplot imports afterwards, how many objects the
# garbage collector has frozen and whether it is on, whether two of
# TensorFlow's TypeVars share the code of their "_atypes.Float32" and
# `typing` is as it was; stderr as printed. A file is written after the
# import and left open: the exit must flush it.
FRESH = """
import gc, json, sys, typing
{start}
import tensorflow
from tensorflow.python.ops import gen_math_ops
codes = [next(ref.__forward_code__ for ref in type_var.__constraints__
              if ref.__forward_arg__ == "_atypes.Float32")
         for type_var in (gen_math_ops.TV_Abs_T, gen_math_ops.TV_Acos_T)]
shared = [codes[0] is codes[1], "compile" in vars(typing)]
loaded = [name for name in {names} if name in sys.modules]
import matplotlib.pyplot
left_open = open({left_open!r}, "w")
left_open.write("flushed at exit")
print(json.dumps([loaded, sys.modules["matplotlib.pyplot"] is not None,
                  gc.get_freeze_count(), gc.isenabled(), shared]))
"""


def _fresh(start, tmp_path):
  """(loaded, pyplot imports, frozen objects, collector on, [code shared,
  typing's own compile left], stderr)."""
  environ = {k: v for k, v in os.environ.items()
             if k != "TF_CPP_MIN_LOG_LEVEL"}  # so that quiet applies
  left_open = tmp_path / "left_open.txt"
  result = subprocess.run(
      [sys.executable, "-c", FRESH.format(
          start=start, names=lean_start.UNUSED_BY_THE_COMMANDS,
          left_open=str(left_open))],
      env=environ, capture_output=True, text=True, timeout=120, check=True)
  assert left_open.read_text() == "flushed at exit"
  loaded, pyplot_imports, frozen, collector_on, shared = json.loads(
      result.stdout.splitlines()[-1])
  return loaded, pyplot_imports, frozen, collector_on, shared, result.stderr


def test_a_command_loads_tensorflow_without_them_and_quietly(tmp_path):
  loaded, pyplot_imports, frozen, collector_on, shared, stderr = _fresh(
      "import t2tlite.bin", tmp_path)
  assert loaded == [] and pyplot_imports
  assert [line for line in stderr.splitlines() if quiet.is_notice(line)] == (
      []), stderr
  # TensorFlow's own objects frozen (hundreds of thousands), the collector
  # on again for what comes after.
  assert frozen > 100_000 and collector_on, (frozen, collector_on)
  # Each distinct forward reference compiled once, `typing` as it was.
  assert shared == [True, False]
  # The library leaves imports and the collector alone: there Keras loads
  # matplotlib (a t2tlite dependency) and h5py (a Keras one), which the
  # commands skip.
  loaded, _, frozen, collector_on, shared, _ = _fresh("import t2tlite",
                                                      tmp_path)
  assert {"matplotlib", "h5py"} <= set(loaded), loaded
  assert frozen == 0 and collector_on and shared == [False, False]


def test_the_collector_is_paused_then_what_was_made_frozen():
  frozen_before = gc.get_freeze_count()
  with lean_start.collector_paused_then_frozen():
    assert not gc.isenabled()
    made_inside = [[] for _ in range(1000)]
  made_after = []
  assert gc.isenabled()
  assert gc.get_freeze_count() >= frozen_before + 1001
  # Frozen objects are out of the collector's generations; later ones in.
  tracked = {id(obj) for obj in gc.get_objects()}
  assert id(made_inside[0]) not in tracked and id(made_after) in tracked
  gc.disable()
  try:  # a collector the caller turned off stays off
    with lean_start.collector_paused_then_frozen():
      pass
    assert not gc.isenabled()
  finally:
    gc.enable()


def test_a_failed_first_import_leaves_the_collector_on():
  with pytest.raises(ImportError):
    with lean_start.collector_paused_then_frozen():
      raise ImportError("no tensorflow")
  assert gc.isenabled()


def test_forward_references_are_compiled_once_inside_only():
  def references():
    type_var = typing.TypeVar("T", "list[probe_a]", "probe_b")
    return [ref.__forward_code__ for ref in type_var.__constraints__]

  with lean_start.forward_references_compiled_once():
    inside = [references(), references()]
  after = [references(), references()]
  assert inside[0][0] is inside[1][0] and inside[0][1] is inside[1][1]
  assert after[0][0] is not after[1][0]
  assert inside[0][0] == after[0][0]  # the same code, compiled again
  assert "compile" not in vars(typing)
  # A `compile` typing already has is left as it is, and stays.
  own = typing.compile = lambda *args: None
  try:
    with lean_start.forward_references_compiled_once():
      assert typing.compile is own
    assert typing.compile is own
  finally:
    del typing.compile


def test_the_first_import_runs_inside_the_context(tmp_path, monkeypatch):
  # `probe_main` imports `probe_optional` if it can, as Keras imports
  # matplotlib; both are on the path.
  (tmp_path / "probe_optional.py").write_text("")
  (tmp_path / "probe_main.py").write_text(
      "try:\n  import probe_optional\nexcept ImportError:\n"
      "  probe_optional = None\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  meta_path = list(sys.meta_path)
  try:
    import_hooks.around_first_import(
        ("probe_main",), lambda: lean_start.hidden(["probe_optional"]))
    import probe_main
    assert probe_main.probe_optional is None
    assert sys.meta_path == meta_path  # the hook stepped aside
    # Python's own loader, as without the hook (it reads the module's
    # data, and a reload runs outside the context).
    assert type(probe_main.__loader__) is importlib.machinery.SourceFileLoader
    assert probe_main.__spec__.loader is probe_main.__loader__
    import probe_optional
    assert probe_optional.__name__ == "probe_optional"
  finally:
    sys.meta_path[:] = meta_path
    for name in ("probe_main", "probe_optional"):
      sys.modules.pop(name, None)


def test_no_hook_is_left_for_a_package_imported_before():
  meta_path = list(sys.meta_path)
  try:
    import_hooks.around_first_import(("probe_never_imported", "json"),
                                     contextlib.nullcontext)
    assert sys.meta_path == meta_path
  finally:
    sys.meta_path[:] = meta_path


def test_info_is_dropped_from_a_packages_folder_not_its_namesakes(
    tmp_path, monkeypatch):
  """As tensorflow's folder is not tensorflow_datasets' (the commands
  drop the INFO records of tensorflow, keras and tensorflow_text)."""
  for name in ("probe_lib", "probe_lib_extra"):
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
  monkeypatch.syspath_prepend(str(tmp_path))
  drop = quiet._DropLibraryInfo(quiet._package_dirs(["probe_lib"]))

  def kept(level, package):
    return drop.filter(logging.LogRecord(
        "absl", level, str(tmp_path / package / "saving.py"), 1, "m", (),
        None))

  assert not kept(logging.INFO, "probe_lib")
  assert kept(logging.WARNING, "probe_lib")
  assert kept(logging.INFO, "probe_lib_extra")
