"""Reading raw parallel text: `<split>.<lang>[.gz]` files aligned by line.

Bad lines are not fatal: an empty line (on either side) and a line that is not
valid UTF-8 are yielded as `Skipped` (counted in the datagen summary). Files
with different line counts are fatal (`DataError` naming both files and counts).
"""
import gzip
import os
import re

from t2tlite.data.samples import DataError, Skipped

# Split name -> file-name stems accepted for it, in order of preference.
SPLIT_ALIASES = {"train": ("train",), "dev": ("dev", "val", "valid"),
                 "test": ("test",)}


def open_binary(path):
  return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def count_lines(path):
  with open_binary(path) as f:
    return sum(1 for _ in f)


def layout_help(raw_data_dir, langs):
  """What an offline raw folder must contain, for error messages."""
  a, b = langs
  return (f"Put aligned plain-text files in {raw_data_dir}, one sentence a "
          f"line, named <split>.<lang> or <split>.<lang>.gz: train.{a} and "
          f"train.{b} (required), dev.{a} and dev.{b} (val. or valid. also "
          f"accepted; a suffix such as test_2016.{a} is accepted when "
          f"unambiguous), test.{a} and test.{b}.")


def find_split_files(raw_data_dir, langs, aliases=None, layout=None):
  """Finds `{split: (path_lang0, path_lang1)}` in a raw folder.

  A split is present when both of its files are; train is required. Exact names
  (`train.en`, `train.en.gz`) win over suffixed ones (`test_2016_flickr.en.gz`).

  Args:
    raw_data_dir: the folder.
    langs: (source, target) language codes.
    aliases: {split: file-name stems accepted for it}; default SPLIT_ALIASES.
    layout: what the folder must hold, for error messages; default
      `layout_help`. (A caller that downloads otherwise than through
      tensorflow-datasets checks that the folder exists first.)

  Raises:
    DataError: the folder or the train files are missing, a split has only one
      side, or a name matches several files.
  """
  layout = layout or layout_help(raw_data_dir, langs)
  if not os.path.isdir(raw_data_dir):
    raise DataError(
        f"raw_data_dir={raw_data_dir} does not exist. {layout} Or leave "
        f"raw_data_dir out to download the corpus through "
        f"tensorflow-datasets (needs internet).")
  names = sorted(os.listdir(raw_data_dir))
  found = {}
  for split, stems in (aliases or SPLIT_ALIASES).items():
    paths = [_find_one(raw_data_dir, names, stems, lang) for lang in langs]
    if all(paths):
      found[split] = tuple(paths)
    elif any(paths):
      have = next(p for p in paths if p)
      missing = langs[paths.index(None)]
      raise DataError(f"{have} has no parallel {missing} file in "
                      f"{raw_data_dir} (expected {stems[0]}.{missing}[.gz]).")
  if "train" not in found:
    raise DataError(f"No training files in raw_data_dir={raw_data_dir} "
                    f"(found: {', '.join(names) or 'nothing'}). {layout}")
  return found


def _find_one(folder, names, stems, lang):
  for stem in stems:
    exact = [n for n in names if n in (f"{stem}.{lang}", f"{stem}.{lang}.gz")]
    pattern = re.compile(
        rf"^{re.escape(stem)}[._-][^.]*\.{re.escape(lang)}(\.gz)?$")
    candidates = exact or [n for n in names if pattern.match(n)]
    if len(candidates) > 1:
      raise DataError(f"Several {lang} files in {folder} could be the "
                      f"'{stem}' split: {', '.join(candidates)}; keep one.")
    if candidates:
      return os.path.join(folder, candidates[0])
  return None


def check_aligned(path_a, count_a, path_b, count_b,
                  remedy="they must match line by line"):
  """Raises DataError naming both files and their line counts (and `remedy`)
  when `count_a != count_b`: a line of one is the translation of the same
  line of the other, so files of different lengths are never cut to the
  shorter one."""
  if count_a != count_b:
    raise DataError(
        f"Misaligned parallel files: {path_a} has {count_a} lines but "
        f"{path_b} has {count_b} lines; {remedy}.")


def read_parallel_lines(path_a, path_b):
  """Yields `(text_a, text_b)` per aligned line, or `Skipped` for bad lines.

  Raises:
    DataError: the two files have different numbers of lines (checked before
      anything is yielded).
  """
  check_aligned(path_a, count_lines(path_a), path_b, count_lines(path_b))
  with open_binary(path_a) as file_a, open_binary(path_b) as file_b:
    for line_no, (raw_a, raw_b) in enumerate(zip(file_a, file_b), start=1):
      texts = []
      for path, raw in ((path_a, raw_a), (path_b, raw_b)):
        try:
          texts.append(raw.decode("utf-8").strip())
        except UnicodeDecodeError:
          texts.append(Skipped("undecodable bytes", f"{path}:{line_no}"))
          break
        if not texts[-1]:
          texts[-1] = Skipped("empty line", f"{path}:{line_no}")
          break
      bad = [t for t in texts if isinstance(t, Skipped)]
      yield bad[0] if bad else tuple(texts)
