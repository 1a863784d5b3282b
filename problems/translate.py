"""WMT 2014 translation (paper, section 5.1), online through tensorflow-datasets
or offline from a folder of aligned `<split>.<lang>[.gz]` files.

Online: `wmt14_translate/de-en` and `/fr-en`. tensorflow-datasets' training
split for de-en is Europarl v7 + Common Crawl + News Commentary v9 (about 4.5M
pairs, as in the paper), dev newstest2013, test newstest2014. For fr-en it adds
the UN corpus and Gigaword FR-EN (about 40.8M pairs before filtering; the paper
reports 36M). Downloads go to `tmp_dir`.

Offline (`--raw_data_dir=DIR`): `train.en` + `train.de` (required), `dev.*`
(or `val.*` / `valid.*`), `test.*`, plain or gzipped; any parallel corpus laid
out this way works (e.g. Multi30k). Empty lines and lines that are not UTF-8
are skipped and counted; files of different lengths are an error.
"""
import os

from t2tlite.data import text_files
from t2tlite.data.samples import DataError, Skipped
from t2tlite.problem import SPLITS, Text2TextProblem, register_problem

_TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def load_tfds_split(name, split, tmp_dir):
  """Downloads and prepares a tensorflow-datasets translation corpus and
  returns the numpy iterator of one split ({lang: bytes} per pair)."""
  import tensorflow_datasets as tfds  # heavy; only the online path needs it
  builder = tfds.builder(name, data_dir=os.path.join(tmp_dir, "tfds"))
  builder.download_and_prepare(
      download_dir=os.path.join(tmp_dir, "downloads"))
  return builder.as_dataset(split=_TFDS_SPLITS[split]).as_numpy_iterator()


class TranslateProblem(Text2TextProblem):
  """Translation from `source_lang` to `target_lang`, one shared vocabulary.

  Class attributes: source_lang, target_lang, tfds_name (online source).
  """
  source_lang = None
  target_lang = None
  tfds_name = None
  num_shards = {"train": 32, "dev": 1, "test": 1}
  vocab_byte_fallback = True  # no UNK in translations: BLEU sees every char
  metric = "bleu"

  @property
  def langs(self):
    return (self.source_lang, self.target_lang)

  def available_splits(self, tmp_dir, raw_data_dir=None):
    if raw_data_dir is None:
      return SPLITS
    found = text_files.find_split_files(raw_data_dir, self.langs)
    return tuple(split for split in SPLITS if split in found)

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    if raw_data_dir is not None:
      files = text_files.find_split_files(raw_data_dir, self.langs)
      yield from self.read_pairs(*files[split])
      return
    yield from self._tfds_samples(split, tmp_dir)

  @staticmethod
  def read_pairs(source_path, target_path):
    """Samples (or `Skipped`) of two aligned text files, line by line."""
    for pair in text_files.read_parallel_lines(source_path, target_path):
      yield pair if isinstance(pair, Skipped) else {
          "inputs": pair[0], "targets": pair[1]}

  def _tfds_samples(self, split, tmp_dir):
    try:
      pairs = load_tfds_split(self.tfds_name, split, tmp_dir)
    except Exception as error:  # network, disk: say how to work offline
      raise DataError(
          f"Could not get {self.tfds_name} through tensorflow-datasets "
          f"({type(error).__name__}: {error}). Without internet, pass "
          f"raw_data_dir=DIR. "
          f"{text_files.layout_help('DIR', self.langs)}") from error
    for index, pair in enumerate(pairs):
      try:
        yield {"inputs": pair[self.source_lang].decode("utf-8"),
               "targets": pair[self.target_lang].decode("utf-8")}
      except UnicodeDecodeError:
        yield Skipped("undecodable bytes", f"{self.tfds_name} {split} #{index}")


@register_problem("translate_ende_wmt")
class TranslateEndeWmt(TranslateProblem):
  """WMT 2014 English->German: sentencepiece BPE, 37000 shared pieces."""
  source_lang, target_lang = "en", "de"
  tfds_name = "wmt14_translate/de-en"
  vocab_type = "bpe"
  vocab_size = 37000


@register_problem("translate_enfr_wmt")
class TranslateEnfrWmt(TranslateProblem):
  """WMT 2014 English->French: 32000 pieces of a sentencepiece unigram model,
  standing in for the paper's word-piece vocabulary (both are likelihood-
  based subword models; word-piece's trainer is not public)."""
  source_lang, target_lang = "en", "fr"
  tfds_name = "wmt14_translate/fr-en"
  vocab_type = "unigram"
  vocab_size = 32000
  num_shards = {"train": 64, "dev": 1, "test": 1}
