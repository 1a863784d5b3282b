"""Vocabularies of tree symbols and words for the tree-constraint tests,
random inputs over them, and a check that outputs are well-formed trees."""
import numpy as np
import tensorflow as tf

from t2tlite.data import trees
from t2tlite.ids import EOS_ID, PAD_ID

B = "\u2581"
# (FRAG has no closing id, so it must never be opened.
TARGET_PIECES = (["<pad>", "</s>", "<unk>", B + "XX"] +
                 [B + b + label for label in ("S", "NP", "VP", "PP", "ADJP")
                  for b in "()"] + [B + "(FRAG"])
INPUT_PIECES = ["<pad>", "</s>", "<unk>", B + "the", B + "cat", "s", B,
                B + "sat", "ting", B + "on", ".", B + "."]


def random_step(vocab_size, seed, scale=4.0):
  """A decode_step of random logits (depending on row, step and seed)."""
  def step(ids, position, cache):
    logits = scale * tf.random.stateless_normal(
        [tf.shape(ids)[0], vocab_size], seed=[seed, position])
    return logits, cache
  return step


def random_inputs(rng, batch, max_len):
  """int32 [batch, len] input ids (EOS-terminated, 0-padded) and the
  number of words of each row."""
  rows, words = [], []
  for _ in range(batch):
    n = int(rng.integers(1, max_len))
    ids = [int(rng.choice([3, 4, 6, 7, 9, 11]))]  # a word start first
    ids += [int(rng.integers(3, len(INPUT_PIECES))) for _ in range(n - 1)]
    rows.append(ids + [EOS_ID])
    words.append(sum(INPUT_PIECES[i].startswith(B) for i in ids))
  width = max(map(len, rows))
  return (tf.constant([r + [PAD_ID] * (width - len(r)) for r in rows]),
          words)


def as_text(ids):
  ids = list(np.asarray(ids))
  ids = ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids
  return " ".join(TARGET_PIECES[i].lstrip(B) for i in ids if i != PAD_ID)


def check_trees(outputs, words):
  for ids, n in zip(np.asarray(outputs), words):
    assert EOS_ID in list(ids), "every output ends (with EOS)"
    text = as_text(ids)
    tree = trees.delinearize(text, ["w"] * n, strict=True)
    assert len(tree.words()) == n
    assert "(FRAG" not in text
