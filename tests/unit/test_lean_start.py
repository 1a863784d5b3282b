"""The commands' lighter start (t2tlite.lean_start): the optional packages
TensorFlow and Keras import (notebook display, image galleries and
loading, legacy HDF5 and sparse support) hidden while TensorFlow loads,
importable after."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from t2tlite import lean_start, quiet


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
# (after `start`), whether pyplot imports afterwards; stderr as printed.
FRESH = """
import json, sys
{start}
import tensorflow
loaded = [name for name in {names} if name in sys.modules]
import matplotlib.pyplot
print(json.dumps([loaded, sys.modules["matplotlib.pyplot"] is not None]))
"""


def _fresh(start):
  environ = {k: v for k, v in os.environ.items()
             if k != "TF_CPP_MIN_LOG_LEVEL"}  # so that quiet applies
  result = subprocess.run(
      [sys.executable, "-c", FRESH.format(
          start=start, names=lean_start.UNUSED_BY_THE_COMMANDS)],
      env=environ, capture_output=True, text=True, timeout=120, check=True)
  loaded, pyplot_imports = json.loads(result.stdout.splitlines()[-1])
  return loaded, pyplot_imports, result.stderr


def test_a_command_loads_tensorflow_without_them_and_quietly():
  loaded, pyplot_imports, stderr = _fresh("import t2tlite.bin")
  assert loaded == [] and pyplot_imports
  assert [line for line in stderr.splitlines() if quiet.is_notice(line)] == (
      []), stderr
  # The library leaves imports alone: there Keras loads matplotlib (a
  # t2tlite dependency) and h5py (a Keras one), which the commands skip.
  loaded, _, _ = _fresh("import t2tlite")
  assert {"matplotlib", "h5py"} <= set(loaded), loaded
