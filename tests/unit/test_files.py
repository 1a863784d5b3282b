"""The small file helpers (t2tlite.files): where the cache lives, files
written whole, text files read with errors that name them."""
import os
import threading

import pytest

from t2tlite import files


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  monkeypatch.delenv(files.CACHE_DIR_ENV, raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  assert files.cache_folder() == str(tmp_path / "xdg" / "t2tlite")
  # An empty XDG_CACHE_HOME counts as unset (the XDG specification).
  for xdg in ("", None):
    if xdg is None:
      monkeypatch.delenv("XDG_CACHE_HOME")
    else:
      monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert files.cache_folder() == str(
        tmp_path / "home" / ".cache" / "t2tlite")
  monkeypatch.setenv(files.CACHE_DIR_ENV, str(tmp_path / "mine"))
  assert files.cache_folder() == str(tmp_path / "mine")
  # Relative, it is made absolute: commands pass it to the processes they
  # start, and say whether it can be made (a folder not there yet).
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv(files.CACHE_DIR_ENV, "cache")
  assert files.cache_folder() == str(tmp_path / "cache")
  from t2tlite import xla_cache
  assert xla_cache.can_make(os.path.join("cache", "xla", "tf-1"))


def test_a_text_file_is_replaced_whole(tmp_path):
  path = str(tmp_path / "run.json")
  files.atomic_write_text(path, "first")
  files.atomic_write_text(path, "second")
  assert (tmp_path / "run.json").read_text() == "second"
  assert os.listdir(tmp_path) == ["run.json"]


def test_threads_writing_one_file_each_write_their_own_temporary(tmp_path):
  # Another thread writes the file whole while this one is writing it.
  path = str(tmp_path / "entry.bin")
  with files._replaced_whole(path) as tmp:
    with open(tmp, "wb") as f:
      f.write(b"first")
    other = threading.Thread(target=files.atomic_write_bytes,
                             args=(path, b"second"))
    other.start()
    other.join()
    assert (tmp_path / "entry.bin").read_bytes() == b"second"
  assert (tmp_path / "entry.bin").read_bytes() == b"first"
  assert os.listdir(tmp_path) == ["entry.bin"]


def test_a_copy_replaces_its_destination_whole(tmp_path):
  source = tmp_path / "vocab.txt"
  source.write_text("a\nb\n")
  destination = tmp_path / "copy.txt"
  destination.write_text("old")
  files.atomic_copy(str(source), str(destination))
  assert destination.read_text() == "a\nb\n"
  with pytest.raises(FileNotFoundError):
    files.atomic_copy(str(tmp_path / "missing"), str(destination))
  assert destination.read_text() == "a\nb\n"
  assert sorted(os.listdir(tmp_path)) == ["copy.txt", "vocab.txt"]


def test_ensemble_members_are_split_and_expanded(monkeypatch):
  monkeypatch.setenv("HOME", "/home/u")
  assert files.split_ensemble("/runs/a", "checkpoint_path") is None
  assert files.split_ensemble(None, "checkpoint_path") is None
  assert files.split_ensemble("/runs/a, ~/b", "model") == ["/runs/a",
                                                          "/home/u/b"]
  with pytest.raises(ValueError) as error:
    files.split_ensemble("/runs/a,,/runs/b", "model")
  assert str(error.value).startswith("--model=/runs/a,,/runs/b: an empty")
