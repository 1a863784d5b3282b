"""Run folders built once per test session and shared by its pytest-xdist
workers: the first worker to ask builds one (under a file lock, in the
session's own temporary folder), the other waits for it and reads the same.

    folder = shared_run_folder(tmp_path_factory, seed=4)   # read it only
    folder = run_copy(tmp_path_factory, "export_run")      # write into this

A shared folder is read, never written: a test that writes into its run
folder (an export, a resumed training) works on `run_copy`. The same
arguments give the same folder, whichever test asked first.
"""
import contextlib
import fcntl
import inspect
import os
import shutil

from corpora import shared_corpus
from run_folder import make_run_folder


def session_root(tmp_path_factory):
  """The folder every worker of this session sees: pytest-xdist gives each
  worker a base temp of its own under the session's (`.../popen-gw0`)."""
  base = tmp_path_factory.getbasetemp()
  return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _locked(path):
  with open(path, "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
    yield


def built_once(tmp_path_factory, name, build):
  """Path of the folder `name` under the session root, built by
  `build(path)` if no worker has built it yet; a failed build leaves
  nothing behind, so the next test to ask builds again (and fails again,
  with its own error)."""
  root = session_root(tmp_path_factory) / "shared"
  root.mkdir(exist_ok=True)
  folder, done = root / name, root / f"{name}.done"
  with _locked(root / f"{name}.lock"):
    if not done.exists():
      # Built where it stays: run.json records the vocabulary's source path.
      shutil.rmtree(folder, ignore_errors=True)
      try:
        build(str(folder))
      except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
      done.touch()
  return str(folder)


def shared_run_folder(tmp_path_factory, **kwargs):
  """The run folder of `make_run_folder(folder, **kwargs)` (tiny model,
  Multi30k vocabulary), built once per session; read it, do not write.
  Skips the test without ../shared/data's Multi30k (the vocabulary is
  trained on it)."""
  shared_corpus("multi30k/raw")
  # Named by the arguments that differ from make_run_folder's defaults,
  # so that seed=3 and no seed name the same folder.
  defaults = {name: parameter.default for name, parameter in
              inspect.signature(make_run_folder).parameters.items()}
  name = "run" + "".join(f"_{key}={kwargs[key]}" for key in sorted(kwargs)
                         if kwargs[key] != defaults[key])
  return built_once(tmp_path_factory, name,
                    lambda path: make_run_folder(path, **kwargs))


def run_copy(tmp_path_factory, name="run", **kwargs):
  """A fresh copy of `shared_run_folder(**kwargs)`, a folder `name` of
  this test's own, for tests that write into their run folder."""
  copy = tmp_path_factory.mktemp("copy") / name
  shutil.copytree(shared_run_folder(tmp_path_factory, **kwargs), copy)
  return str(copy)


def shared_trained_run(tmp_path_factory, writable=False, **kwargs):
  """(folder, model, Vocabulary) of `shared_run_folder(**kwargs)` reloaded
  as decoding does; with `writable`, of a fresh `run_copy` of it."""
  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  folder = (run_copy(tmp_path_factory, **kwargs) if writable else
            shared_run_folder(tmp_path_factory, **kwargs))
  model, info, _ = run_dir.load_trained_model(folder)
  return folder, model, Vocabulary.from_file(info.vocab_file)
