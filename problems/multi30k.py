"""Multi30k task 1 (Elliott et al., 2016): English image captions with their
German and French translations, the corpus of the README's real-data results.

Online, the files of the dataset's public release are downloaded from
MULTI30K_URL (override it with the problem's `base_url` argument or the
T2T_MULTI30K_URL environment variable) into `tmp_dir/multi30k/`, laid out as
released: raw/STEM.LANG.gz, and tok/STEM.lc.norm.tok.LANG, the tokenized
references of val and test2016 that Multi30k results are scored on. Each
file goes to a temporary name and is renamed once it is complete and
checked: its line count and, for train, val and test2016, the SHA-256 of its
uncompressed text (the release's files, pinned below); a first download
fills `multi30k.part`, renamed `multi30k` once complete. Offline,
`raw_data_dir=DIR` reads the raw names from DIR (gzipped or not; not
checked, so a subset works): train.{en,L}, val.{en,L} and
test_2016_flickr.{en,L}; `tmp_dir/multi30k/raw` of a download is such a
folder, and one line names what such a folder leaves out.

Splits: train (29,000 pairs), dev = val (1,014), test = test2016 (1,000), and
the later test sets as named extra splits, written when present:
test2017_flickr (1,000), test2017_mscoco (461), test2018_flickr (1,071).

The records are those of `translate_ende_wmt` / `translate_enfr_wmt` with
`--raw_data_dir` over the same files and `--vocab_size=8000` (the recipe's
shared vocabulary: BPE for German, unigram for French), so the results of
that recipe hold for these problems.
"""
import os
import shutil

from absl import logging

from t2tlite.data import download
from t2tlite.data import text_files
from t2tlite.data.samples import DataError
from t2tlite.problem import register_problem
from t2tlite.problems.translate import TranslateProblem

MULTI30K_URL = ("https://raw.githubusercontent.com/multi30k/dataset/master/"
                "data/task1")
URL_VARIABLE = "T2T_MULTI30K_URL"

# split -> the release's file-name stem (raw/STEM.LANG.gz).
RELEASE_STEMS = {
    "train": "train", "dev": "val", "test": "test_2016_flickr",
    "test2017_flickr": "test_2017_flickr",
    "test2017_mscoco": "test_2017_mscoco",
    "test2018_flickr": "test_2018_flickr",
}
# The lowercased, punctuation-normalised, Moses-tokenized references that
# Multi30k results are scored on (t2t-bleu --tokenized_reference).
TOKENIZED_STEMS = ("val", "test_2016_flickr")


def raw_file(stem, lang):
  return f"raw/{stem}.{lang}.gz"


def tokenized_file(stem, lang):
  return f"tok/{stem}.lc.norm.tok.{lang}"


_E = download.Expected
# Release path -> its (uncompressed) text. The SHA-256 are of the release's
# files as mirrored beside the project (their gzip headers keep the
# release's names and December 2017 dates); the 2017/2018 test sets were not
# there to hash, so only their published sizes (image_splits/*.txt) are
# checked.
RELEASE = {
    raw_file("train", "en"): _E(29000,
        "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6"),
    raw_file("train", "de"): _E(29000,
        "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72"),
    raw_file("train", "fr"): _E(29000,
        "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d"),
    raw_file("val", "en"): _E(1014,
        "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227"),
    raw_file("val", "de"): _E(1014,
        "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660"),
    raw_file("val", "fr"): _E(1014,
        "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc"),
    raw_file("test_2016_flickr", "en"): _E(1000,
        "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182"),
    raw_file("test_2016_flickr", "de"): _E(1000,
        "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16"),
    raw_file("test_2016_flickr", "fr"): _E(1000,
        "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6"),
    tokenized_file("val", "en"): _E(1014,
        "46573ce391ae227f1c72f873392436a20ef18e0a6d518098cfbd70b77c8572ec"),
    tokenized_file("val", "de"): _E(1014,
        "97232bd273eceb7207f689527386a97e4be2616b18ada47576bdaf96c8ae1f00"),
    tokenized_file("val", "fr"): _E(1014,
        "b303e301aa21fe7822a846b2b3fb2d5a1121ec807cd5b1d006fb7b2b5507168a"),
    tokenized_file("test_2016_flickr", "en"): _E(1000,
        "5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2"),
    tokenized_file("test_2016_flickr", "de"): _E(1000,
        "c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4"),
    tokenized_file("test_2016_flickr", "fr"): _E(1000,
        "1463bd5960f9bfe098ec3cd752d3df0c49c84dc646fb518964a29232658cd836"),
    **{raw_file(stem, lang): _E(lines)
       for stem, lines in (("test_2017_flickr", 1000),
                           ("test_2017_mscoco", 461),
                           ("test_2018_flickr", 1071))
       for lang in ("en", "de", "fr")},
}


class Multi30kProblem(TranslateProblem):
  """English -> `target_lang` on Multi30k task 1.

  Args:
    reverse: swap inputs and targets (the registry's NAME_rev).
    base_url: the release's task-1 folder (holding raw/ and tok/); default
      $T2T_MULTI30K_URL, else MULTI30K_URL.
    release: {path under base_url: download.Expected}; default RELEASE.
  """
  source_lang = "en"
  vocab_size = 8000
  extra_test_splits = ("test2017_flickr", "test2017_mscoco",
                       "test2018_flickr")

  def __init__(self, reverse=False, base_url=None, release=None):
    super().__init__(reverse=reverse)
    self.base_url = (base_url or os.environ.get(URL_VARIABLE)
                     or MULTI30K_URL).rstrip("/")
    self.release = RELEASE if release is None else release

  def _layout(self, folder):
    a, b = self.langs
    return (f"Put the Multi30k task-1 files in {folder} under the release's "
            f"names, gzipped or not: train.{a} and train.{b} (required), "
            f"val.{a}/.{b}, test_2016_flickr.{a}/.{b}, and optionally "
            f"test_2017_flickr, test_2017_mscoco, test_2018_flickr.")

  def release_files(self):
    """The release's files this problem uses, as paths under base_url: both
    languages' raw text of every split and tokenized references of dev and
    test."""
    return [make(stem, lang) for make, stems in (
        (raw_file, RELEASE_STEMS.values()), (tokenized_file, TOKENIZED_STEMS))
            for stem in stems for lang in self.langs]

  def fetch_release(self, tmp_dir):
    """Fetches and checks `release_files` into tmp_dir/multi30k (raw/ and
    tok/, as the release lays them out); returns that folder. A first
    download goes to tmp_dir/multi30k.part, renamed once every file is
    there, so tmp_dir/multi30k is never a partial release.

    Raises:
      DataError: one line naming the URL that failed and the ways to work
        offline (raw_data_dir, T2T_MULTI30K_URL).
    """
    folder = os.path.join(tmp_dir, "multi30k")
    into = folder if os.path.isdir(folder) else f"{folder}.part"
    try:
      for name in self.release_files():
        download.fetch(f"{self.base_url}/{name}", os.path.join(into, name),
                       self.release[name])
    except DataError as error:
      if into != folder and not any(files for _, _, files in os.walk(into)):
        shutil.rmtree(into, ignore_errors=True)
      raise DataError(
          f"{error} Offline, give raw_data_dir=DIR with the release's files "
          f"(train, val, test_2016_flickr .{self.langs[0]}/.{self.langs[1]}"
          f"), or set {URL_VARIABLE} to a copy of its task-1 folder (raw/, "
          "tok/).") from None
    if into != folder:
      os.replace(into, folder)
    return folder

  def _source_files(self, tmp_dir, raw_data_dir):
    """{split: (source path, target path)} of the files to read: raw_data_dir's,
    or the release's, downloaded and checked into tmp_dir/multi30k/raw."""
    aliases = {split: (stem,) for split, stem in RELEASE_STEMS.items()}
    if raw_data_dir is None:
      raw_data_dir = os.path.join(self.fetch_release(tmp_dir), "raw")
    elif not os.path.isdir(raw_data_dir):
      raise DataError(f"raw_data_dir={raw_data_dir} does not exist. "
                      f"{self._layout(raw_data_dir)} Or leave raw_data_dir "
                      f"out to download them from {self.base_url}.")
    return text_files.find_split_files(raw_data_dir, self.langs, aliases,
                                       self._layout(raw_data_dir))

  def available_splits(self, tmp_dir, raw_data_dir=None):
    found = self._source_files(tmp_dir, raw_data_dir)
    if raw_data_dir is not None:
      self._say_what_is_missing(found, tmp_dir)
    return tuple(split for split in self.splits if split in found)

  def _say_what_is_missing(self, found, tmp_dir):
    """Logs, in one line, what of a download raw_data_dir leaves out: the
    later test sets, and the tokenized references that results are scored
    on (read from tmp_dir/multi30k/tok, where a download puts them)."""
    splits = [split for split in self.extra_test_splits if split not in found]
    folder = os.path.join(tmp_dir or "", "multi30k")
    references = [name for name in self.release_files()
                  if name.startswith("tok/") and tmp_dir and
                  not os.path.exists(os.path.join(folder, name))]
    missing = ([f"no {', '.join(splits)} in raw_data_dir (those test "
                "splits are not written)"] if splits else []) + (
                    [f"no {', '.join(references)} in {folder} (t2t-bleu "
                     "--tokenized_reference)"] if references else [])
    if missing:
      logging.info("Left out: %s; a download (no raw_data_dir) brings "
                   "them.", "; ".join(missing))

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    files = self._source_files(tmp_dir, raw_data_dir)
    yield from self.read_pairs(*files[split])


@register_problem("translate_ende_multi30k")
class TranslateEndeMulti30k(Multi30kProblem):
  """Multi30k English->German: the recipe's 8000 shared BPE pieces."""
  target_lang = "de"
  vocab_type = "bpe"


@register_problem("translate_enfr_multi30k")
class TranslateEnfrMulti30k(Multi30kProblem):
  """Multi30k English->French: the recipe's 8000 shared unigram pieces."""
  target_lang = "fr"
  vocab_type = "unigram"
  num_shards = {"train": 64, "dev": 1, "test": 1}
