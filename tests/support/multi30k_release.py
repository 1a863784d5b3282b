"""The Multi30k task-1 release as the download tests serve it, and the
comparison of two problems' generated files."""
import gzip
import hashlib
import os
import pathlib

from corpora import read_lines, shared_corpus, write_lines

# ../shared/data mirrors train, val and test2016 only. The later test sets
# are served as stand-ins of their published sizes, cut from those: they
# show that the named extra splits are fetched, checked and written.
STAND_INS = {"test_2017_flickr": ("test_2016_flickr", 1000),
             "test_2017_mscoco": ("val", 461),
             "test_2018_flickr": ("train", 1071)}
MIRRORED = ("train", "val", "test_2016_flickr")


def release_folder(folder, langs, train_lines=None):
  """Lays out `folder` as the release's task-1 folder serves the files a
  problem fetches: raw/STEM.LANG.gz, with train (its first `train_lines`
  lines, or the release's own file), val and test2016 as released, and
  STAND_INS; tok/ with the tokenized val and test2016. Skips the test when
  the corpus is absent."""
  source = shared_corpus("multi30k")
  folder = pathlib.Path(folder)
  for sub in ("raw", "tok"):
    (folder / sub).mkdir(parents=True, exist_ok=True)
  for lang in langs:
    for stem in MIRRORED:
      name = f"raw/{stem}.{lang}.gz"
      if stem == "train" and train_lines:
        write_lines(folder / name, read_lines(source / name, train_lines))
      else:
        (folder / name).write_bytes((source / name).read_bytes())
    for stem in ("val", "test_2016_flickr"):
      name = f"tok/{stem}.lc.norm.tok.{lang}"
      (folder / name).write_bytes((source / name).read_bytes())
    for stem, (cut_from, lines) in STAND_INS.items():
      write_lines(folder / f"raw/{stem}.{lang}.gz",
                  read_lines(source / f"raw/{cut_from}.{lang}.gz", lines))
  return folder


def served_release(folder):
  """{path under folder: Expected} of the files in `folder`'s raw/ and tok/:
  their line counts and the SHA-256 of their uncompressed bytes, computed
  here (not by the code under test)."""
  from t2tlite.data.download import Expected
  release = {}
  folder = pathlib.Path(folder)
  for path in sorted(folder.glob("raw/*.gz")) + sorted(folder.glob("tok/*")):
    text = path.read_bytes()
    if path.suffix == ".gz":
      text = gzip.decompress(text)
    release[path.relative_to(folder).as_posix()] = Expected(
        text.count(b"\n"), hashlib.sha256(text).hexdigest())
  return release


def generated_files(data_dir, data_name):
  """{name with data_name replaced by "P": bytes} of what datagen wrote for
  `data_name`: vocabulary, shards, their statistics and the split texts
  (not the summary, which names data_dir)."""
  files = {}
  for name in sorted(os.listdir(data_dir)):
    if data_name in name and not name.endswith(".datagen.json"):
      files[name.replace(data_name, "P")] = (
          pathlib.Path(data_dir) / name).read_bytes()
  return files


def differences(data_dir_a, name_a, data_dir_b, name_b, splits=None):
  """The generated files of problem name_a that differ from name_b's (or
  exist on one side only), as a list of names; only the files of `splits`
  (and the vocabulary) when given."""
  a = generated_files(data_dir_a, name_a)
  b = generated_files(data_dir_b, name_b)
  if splits is not None:
    def kept(name):
      return name.startswith("vocab.") or any(
          name.startswith(f"P-{split}-") or name.startswith(f"P-{split}.")
          for split in splits)
    a = {k: v for k, v in a.items() if kept(k)}
    b = {k: v for k, v in b.items() if kept(k)}
  return sorted(name for name in a.keys() | b.keys()
                if a.get(name) != b.get(name))
