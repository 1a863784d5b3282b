"""English constituency parsing on the Wall Street Journal (paper, section 6.3).

Reads a folder of Penn Treebank `.mrg` files (`--raw_data_dir`, searched
recursively; the LDC treebank is licensed and never downloaded). Split:

* standard: when files `wsj_SSxx.mrg` of sections 02-23 exist, sections 02-21
  are train, 22 dev, 23 test (other sections are not used);
* otherwise (e.g. the NLTK sample, wsj_0001-wsj_0199): files sorted by name,
  the first 8/9 train and the rest dev; there is no test split (for the
  sample: wsj_0001-0159 train, wsj_0160-0179 dev).

Samples follow Vinyals et al. 2015 (see `t2tlite.data.trees`): source = words,
target = the normalised tree, depth first, with labelled closing brackets.
The POS tags are kept (`pos_tags = False` in a subclass writes XX for each,
as Vinyals et al. did): EVALB does not score them, but on the WSJ sample a
model that predicts them places its brackets better (docs/results.md, "WSJ
sample parsing"). Vocabularies: the words are split into 16K sentencepiece
BPE pieces, the paper's WSJ-only size (reduced with a warning on small
corpora), trained on the words only; the targets have their own closed
vocabulary with one id per tree symbol (`(NP`, `)NP`, `NN`, ...), read from
the training trees (a sentencepiece word model,
vocab.parsing_wsj.targets.model), so that no symbol is split into pieces;
symbols never seen in training are UNK.

Decoding is constrained (`decode_constraint`): every output is a
well-formed tree with one tag per input word (`TreeConstraint`); the decode
hparam constrained=false turns it off, and `postprocess` then repairs.
"""
import os
import re

from t2tlite.data import trees
from t2tlite.data.tree_graph import bracketed_trees
from t2tlite.data.samples import DataError, Skipped
from t2tlite.decode import tree_constraint
from t2tlite.decode.tree_constraint import TreeConstraint
from t2tlite.problem import SPLITS, Text2TextProblem, register_problem

_SECTION = re.compile(r"^wsj_(\d\d)\d\d\.mrg$", re.IGNORECASE)
_STANDARD = {"train": range(2, 22), "dev": (22,), "test": (23,)}


def split_files(raw_data_dir):
  """{split: [.mrg paths]} of a treebank folder (see the module doc).

  Raises:
    DataError: no folder given, or it is missing or holds no .mrg file.
  """
  if raw_data_dir is None:
    raise DataError("parsing_wsj needs raw_data_dir=DIR: a folder of Penn "
                    "Treebank .mrg files (licensed by the LDC; never "
                    "downloaded).")
  paths = []
  if os.path.isdir(raw_data_dir):
    for folder, _, names in os.walk(raw_data_dir):
      paths += [os.path.join(folder, n) for n in names
                if n.lower().endswith(".mrg")]
  if not paths:
    state = "holds no .mrg file" if os.path.isdir(raw_data_dir) else (
        "does not exist")
    raise DataError(
        f"raw_data_dir={raw_data_dir} {state}. parsing_wsj reads Penn "
        f"Treebank files: put the WSJ .mrg files there (any layout, e.g. "
        f"02/wsj_0200.mrg ... 24/wsj_2454.mrg; sections 02-21 train, 22 "
        f"dev, 23 test). The treebank is licensed by the LDC, so there is no "
        f"online source; the NLTK sample folder also works.")
  paths.sort(key=os.path.basename)
  sections = {p: int(m.group(1)) for p in paths
              if (m := _SECTION.match(os.path.basename(p)))}
  if any(2 <= s <= 23 for s in sections.values()):
    return {split: [p for p in paths if sections.get(p) in wanted]
            for split, wanted in _STANDARD.items()}
  num_train = max(1, len(paths) * 8 // 9)
  return {"train": paths[:num_train], "dev": paths[num_train:], "test": []}


@register_problem("parsing_wsj")
class ParsingWsj(Text2TextProblem):
  """WSJ constituency parsing as sequence to sequence (words -> tree)."""
  vocab_type = "bpe"
  vocab_size = 16000
  target_vocab_type = "word"
  num_shards = {"train": 8, "dev": 1, "test": 1}
  pos_tags = True
  # Section 6.3: maximum output length input length + 300 and beam 21. Alpha
  # 0 rather than the paper's 0.3: constrained, on the WSJ sample's dev
  # split, it gave 75.5 F1 against 73.8 (fewer spurious brackets;
  # docs/results.md, "WSJ sample parsing"). Unconstrained, 0.3 is better there.
  decode_defaults = "beam_size=21,alpha=0.0,extra_length=300"

  @property
  def metric(self):
    """Bracket F1 (t2t-parse-eval's); exact match for the reversed problem
    (tree -> words)."""
    return "exact_match" if self.reverse else "bracket_f1"

  def available_splits(self, tmp_dir, raw_data_dir=None):
    files = split_files(raw_data_dir)
    return tuple(s for s in SPLITS if files[s])

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    for path in split_files(raw_data_dir)[split]:
      for number, tree in enumerate(trees.read_trees(path), start=1):
        tree = trees.normalize(tree)
        if tree is None:
          yield Skipped("tree with only empty elements",
                        f"{path}: tree {number}")
          continue
        words, target = trees.linearize(tree, pos_tags=self.pos_tags)
        yield {"inputs": " ".join(words), "targets": target}

  def postprocess(self, text, inputs=None):
    """Decoded target -> bracketed tree string, words taken from `inputs`
    (repairing malformed output, see `trees.delinearize`). The reversed
    problem (tree -> words) returns text unchanged."""
    if self.reverse:
      return text
    words = ([trees.escape_word(w) for w in inputs.split()]
             if inputs is not None else None)
    return str(trees.delinearize(text, words, strict=False))

  def decode_constraint(self, input_vocab, target_vocab):
    """Well-formed trees with one tag per input word (`TreeConstraint`);
    none for the reversed problem (its targets are words)."""
    if self.reverse:
      return None
    return TreeConstraint.from_vocabularies(input_vocab, target_vocab)

  def word_pointer_tables(self, input_vocab, target_vocab):
    """Each tag is for the next word (`tree_constraint.word_pointer_tables`);
    none for the reversed problem."""
    if self.reverse:
      return None
    return tree_constraint.word_pointer_tables(input_vocab.pieces(),
                                               target_vocab.pieces())

  def postprocess_graph(self, outputs, inputs):
    """Constrained linearized trees -> bracketed trees with the words
    (`tree_graph.bracketed_trees`)."""
    if self.reverse:
      return outputs
    return bracketed_trees(outputs, inputs)
