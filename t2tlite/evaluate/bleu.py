"""BLEU of translations against references, never a teacher-forced proxy.

Two figures, each cased and uncased:

* sacreBLEU on detokenized text (Post, 2018) with its signature: the number
  to publish and compare across papers.
* "tokenized BLEU", the paper's Table 2 kind: both sides tokenized (sacrebleu's
  13a tokenizer, the mteval-v13a rules that Moses' default tokenizer also
  follows, keeping hyphenated words whole), then every intra-word hyphen split
  as tensor2tensor's get_ende_bleu.sh does (`a-b` -> `a ##AT##-##AT## b`), then
  BLEU on those tokens (multi-bleu.perl style, no further tokenization). Only
  approximately comparable with published tokenized scores, whose exact
  tokenizer settings differ.
"""
import dataclasses
import re

from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

# (\S)-(\S) replaced left to right without overlap, like Perl's s{}{}g.
_COMPOUND = re.compile(r"(\S)-(\S)")
_TOKENIZE_13A = Tokenizer13a()


def split_compounds(tokenized):
  """`well-known` -> `well ##AT##-##AT## known` (get_ende_bleu.sh)."""
  return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", tokenized)


def paper_tokenize(line):
  """13a tokens with hyphenated compounds split, as one space-joined str."""
  return split_compounds(_TOKENIZE_13A(line.strip()))


@dataclasses.dataclass(frozen=True)
class BleuReport:
  """The four figures t2t-bleu prints; each a sacrebleu BLEUScore (its
  `.score` is BLEU in [0, 100], `str()` the usual `BLEU = ...` line)."""
  cased: object
  uncased: object
  cased_signature: str
  uncased_signature: str
  tokenized_cased: object
  tokenized_uncased: object

  def lines(self):
    """Human-readable report; the first line is sacrebleu's `BLEU = ...`."""
    return [
        str(self.cased),
        f"  signature: {self.cased_signature}",
        f"uncased {self.uncased}",
        f"  signature: {self.uncased_signature}",
        f"tokenized BLEU (13a, compounds split as ##AT##-##AT##; the paper's "
        f"Table 2 kind): cased {self.tokenized_cased.score:.2f}, uncased "
        f"{self.tokenized_uncased.score:.2f}",
    ]


def corpus_bleu(translations, references):
  """All BLEU figures of aligned lists of detokenized sentences.

  Args:
    translations: list of str, one per segment.
    references: list of str, the same length.
  Returns:
    BleuReport.
  Raises:
    ValueError: the lists differ in length.
  """
  if len(translations) != len(references):
    raise ValueError(f"{len(translations)} translations but "
                     f"{len(references)} references")
  report = {}
  for name, lowercase in (("cased", False), ("uncased", True)):
    metric = BLEU(lowercase=lowercase)
    report[name] = metric.corpus_score(translations, [references])
    report[f"{name}_signature"] = str(metric.get_signature())
    tokenized = BLEU(lowercase=lowercase, tokenize="none", force=True)
    report[f"tokenized_{name}"] = tokenized.corpus_score(
        [paper_tokenize(t) for t in translations],
        [[paper_tokenize(r) for r in references]])
  return BleuReport(**report)


def read_lines(path, flag):
  """Lines of a UTF-8 text file without their line ends.

  Raises:
    FileNotFoundError / ValueError: naming `flag` and the path.
  """
  try:
    with open(path, encoding="utf-8") as f:
      return f.read().splitlines()
  except FileNotFoundError:
    raise FileNotFoundError(f"--{flag}={path}: no such file") from None
  except UnicodeDecodeError as error:
    raise ValueError(f"--{flag}={path}: not UTF-8 text ({error})") from None


def read_reference(path, flag, translations, translation_path):
  """Lines of the reference file `path` (flag --`flag`), which must be as
  many as `translations`, read from `translation_path`.

  Raises:
    ValueError: different line counts (both files named), or unreadable text.
  """
  references = read_lines(path, flag)
  if len(translations) != len(references):
    raise ValueError(
        f"--translation={translation_path} has {len(translations)} lines but "
        f"--{flag}={path} has {len(references)}; they must be "
        "aligned line by line.")
  return references


def file_bleu(translation_path, reference_path):
  """`corpus_bleu` of two files aligned by line.

  Raises:
    ValueError: different line counts (both files named), or unreadable text.
  """
  translations = read_lines(translation_path, "translation")
  references = read_reference(reference_path, "reference", translations,
                              translation_path)
  return corpus_bleu(translations, references)
