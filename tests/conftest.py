"""Shared fixtures: the real corpora in ../shared/data (skipped when absent) and
one Multi30k datagen run reused by the data tests."""
import gzip
import itertools
import pathlib

import pytest

SHARED_DATA = (pathlib.Path(__file__).resolve().parents[1].parent / "shared" /
               "data")
MULTI30K_TRAIN_LINES = 3000  # first lines of Multi30k train used by the tests


def shared_corpus(name):
  """Path of ../shared/data/<name>; skips the test when it is absent."""
  path = SHARED_DATA / name
  if not path.is_dir():
    pytest.skip(f"real corpus {path} is absent (see ../shared/data/README.md)")
  return path


def write_lines(path, lines):
  """Writes str lines to path, gzipped when it ends with .gz."""
  opener = gzip.open if str(path).endswith(".gz") else open
  with opener(path, "wt", encoding="utf-8") as f:
    f.writelines(line + "\n" for line in lines)


def read_lines(path, limit=None):
  opener = gzip.open if str(path).endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    return [line.rstrip("\n") for line in itertools.islice(f, limit)]


@pytest.fixture(scope="session")
def multi30k_raw(tmp_path_factory):
  """A raw folder laid out for --raw_data_dir: the first 3000 EN/DE training
  pairs of Multi30k (plain text) and its full val and test2016 sets (gzipped,
  under their original names)."""
  source = shared_corpus("multi30k/raw")
  folder = tmp_path_factory.mktemp("multi30k_raw")
  for lang in ("en", "de"):
    write_lines(folder / f"train.{lang}",
                read_lines(source / f"train.{lang}.gz", MULTI30K_TRAIN_LINES))
    for name in ("val", "test_2016_flickr"):
      (folder / f"{name}.{lang}.gz").write_bytes(
          (source / f"{name}.{lang}.gz").read_bytes())
  return folder


@pytest.fixture(scope="session")
def multi30k_data(multi30k_raw, tmp_path_factory):
  """(problem, data_dir, summary): translate_ende_wmt generated from
  `multi30k_raw` with a 1000-piece vocabulary."""
  from t2tlite.problem import get_problem
  import t2tlite.problems  # noqa: F401  (registers the built-in problems)
  problem = get_problem("translate_ende_wmt")
  data_dir = tmp_path_factory.mktemp("multi30k_data")
  summary = problem.generate_data(str(data_dir), raw_data_dir=str(multi30k_raw),
                                  vocab_size=1000)
  return problem, data_dir, summary
