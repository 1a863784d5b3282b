"""A user problem as a plugin author writes it: sort a line of digits, with
a decoding constraint of its own (outputs are sorted and as long as the
input)."""
import random

import tensorflow as tf

from t2tlite.data.vocab import EOS_ID
from t2tlite.decode.constraints import DecodeConstraint
from t2tlite.problem import Text2TextProblem, register_problem


@register_problem("plugin_sort_digits")
class PluginSortDigits(Text2TextProblem):
  vocab_size = 24  # 3 special ids, "▁", 10 digits, 10 "▁d" pieces
  num_shards = {"train": 2, "dev": 1, "test": 1}
  sizes = {"train": 300, "dev": 30, "test": 30}

  def generate_samples(self, split, tmp_dir, raw_data_dir=None):
    rng = random.Random(split)
    for _ in range(self.sizes[split]):
      digits = [str(rng.randrange(10)) for _ in range(rng.randint(1, 12))]
      yield {"inputs": " ".join(digits), "targets": " ".join(sorted(digits))}

  def decode_constraint(self, input_vocab, target_vocab):
    pieces = [p.decode() for p in target_vocab.id_to_piece(
        list(range(target_vocab.size))).numpy()]
    return SortedDigits(pieces)


class SortedDigits(DecodeConstraint):
  """Whole-digit pieces ("▁d") in non-decreasing order, one per input
  digit, then EOS. State: the last digit written, digits still to write."""

  def __init__(self, pieces):
    self.digit = tf.constant(
        [int(p[1]) if len(p) == 2 and p[0] == "\u2581" and p[1].isdigit()
         else -1 for p in pieces])

  def initial_state(self, inputs, max_lengths):
    digits = tf.reduce_sum(tf.cast(inputs > EOS_ID, tf.int32), axis=1)
    return {"last": tf.zeros_like(digits), "left": digits}

  def advance(self, state, tokens):
    digit = tf.gather(self.digit, tokens)
    wrote = digit >= 0
    return {"last": tf.where(wrote, digit, state["last"]),
            "left": state["left"] - tf.cast(wrote, tf.int32)}

  def allowed(self, state, step, vocab_size):
    digit_ok = ((self.digit[tf.newaxis] >= state["last"][:, tf.newaxis]) &
                (state["left"] > 0)[:, tf.newaxis])
    end = (tf.range(vocab_size) == EOS_ID)[tf.newaxis]
    return digit_ok | end & (state["left"] == 0)[:, tf.newaxis]


@register_problem("plugin_sort_digits_scored")
class PluginSortDigitsScored(PluginSortDigits):
  """plugin_sort_digits with a dev metric of its own: the percent of
  outputs holding the input's digits (sorted or not)."""
  metric = "same_digits"

  def score_outputs(self, outputs, pairs):
    same = sum(sorted(out.split()) == sorted(source.split())
               for out, (source, _) in zip(outputs, pairs))
    return {"same_digits": 100.0 * same / max(len(pairs), 1)}
