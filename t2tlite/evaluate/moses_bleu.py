"""BLEU against lowercased, Moses-tokenized references.

Many published results (Multi30k's among them) are multi-bleu.perl scores on
references that were punctuation-normalised (normalize-punctuation.perl),
lowercased and tokenized (tokenizer.perl, with its HTML escaping of quotes and
apostrophes). `moses_tokenize` applies that pipeline to detokenized system
output through sacremoses, the Python port of those scripts; on Multi30k's
test2016 it reproduces the `tok/*.lc.norm.tok.{en,de}` files line for line
from the raw ones, so a model's output and the published references meet on
the same tokens.
"""
from sacrebleu.metrics import BLEU


def moses_tokenize(lines, language):
  """Lowercased, punctuation-normalised, Moses-tokenized lines.

  Args:
    lines: list of str, detokenized text.
    language: Moses language code of the text ("en", "de", "fr", ...).
  Returns:
    list of str, tokens joined by single spaces.
  """
  from sacremoses import MosesPunctNormalizer, MosesTokenizer
  normalizer = MosesPunctNormalizer(lang=language)
  tokenizer = MosesTokenizer(lang=language)
  return [tokenizer.tokenize(normalizer.normalize(line).lower(), escape=True,
                             return_str=True)
          for line in lines]


def lowercase_tokenized_bleu(translations, tokenized_references, language):
  """BLEU of detokenized translations against tokenized lowercased references.

  Args:
    translations: list of str, detokenized system output.
    tokenized_references: list of str, already lowercased and tokenized.
    language: Moses language code of both.
  Returns:
    sacrebleu BLEUScore computed on the tokens as given (tokenize="none").
  Raises:
    ValueError: the lists differ in length.
  """
  if len(translations) != len(tokenized_references):
    raise ValueError(f"{len(translations)} translations but "
                     f"{len(tokenized_references)} references")
  metric = BLEU(tokenize="none", force=True)
  return metric.corpus_score(moses_tokenize(translations, language),
                             [tokenized_references])
