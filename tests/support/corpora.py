"""The real corpora in ../shared/data beside the checkout (tests skip when
they are absent) and small text-file helpers."""
import gzip
import itertools
import pathlib

import pytest

# tests/support/corpora.py -> the folder that holds the checkout.
SHARED_DATA = (pathlib.Path(__file__).resolve().parents[2].parent / "shared" /
               "data")
MULTI30K_TRAIN_LINES = 3000  # first lines of Multi30k train used by the tests


# How to get each corpus, for the skip reasons.
HOW_TO_GET = {
    "multi30k": "put Multi30k task 1 there as its release lays it out (raw/, "
                "tok/): the DATA_DIR/tmp/multi30k folder that `t2t-datagen "
                "--problem=translate_ende_multi30k --data_dir=DATA_DIR` "
                "downloads (and translate_enfr_multi30k for French)",
    "wsj_sample": "put the Penn Treebank sample of NLTK's nltk_data "
                  "(corpora/treebank: wsj_0001.mrg ... wsj_0179.mrg) there",
}


def shared_corpus(name):
  """Path of ../shared/data/<name>; skips the test when it is absent,
  saying how to get it."""
  path = SHARED_DATA / name
  if not path.is_dir():
    top = name.split("/")[0]
    pytest.skip(f"real corpus {path} is absent: "
                f"{HOW_TO_GET.get(top, 'see ../shared/data/README.md')}")
  return path


def write_lines(path, lines):
  """Writes str lines to path (each ending in a newline), gzipped when it
  ends with .gz; returns the path as a string."""
  opener = gzip.open if str(path).endswith(".gz") else open
  with opener(path, "wt", encoding="utf-8") as f:
    f.writelines(line + "\n" for line in lines)
  return str(path)


def read_lines(path, limit=None):
  opener = gzip.open if str(path).endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    return [line.rstrip("\n") for line in itertools.islice(f, limit)]


def multi30k_raw_folder(folder, languages):
  """Lays out `folder` for --raw_data_dir: the first MULTI30K_TRAIN_LINES
  Multi30k training lines of each language (plain text) and its full val
  and test2016 sets (gzipped, under their original names); returns it.
  Skips the test when the corpus is absent."""
  source = shared_corpus("multi30k/raw")
  folder = pathlib.Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  for lang in languages:
    write_lines(folder / f"train.{lang}",
                read_lines(source / f"train.{lang}.gz", MULTI30K_TRAIN_LINES))
    for name in ("val", "test_2016_flickr"):
      (folder / f"{name}.{lang}.gz").write_bytes(
          (source / f"{name}.{lang}.gz").read_bytes())
  return folder
