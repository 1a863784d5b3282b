"""Target prefixes: each output starts with its row's given tokens
(interactive translation, post-editing; fairseq's prefix decoding,
CTranslate2's target_prefix).

At each step below a row's prefix length the search writes the prefix's
token, scored with the model's log-probability of it (so beam scores and
length penalties are those of the whole output, prefix included); past it
the search goes on as it would from that prefix. `step_rules` applies it,
for every strategy; `check_prefixes` checks a request's prefixes against
its output limits before anything is searched.

    prefix = ForcedPrefix(tf.constant([[17, 4, 0], [0, 0, 0]]))  # row 2: none
"""
import dataclasses

import tensorflow as tf

from t2tlite.ids import EOS_ID, PAD_ID, UNK_ID


@dataclasses.dataclass(frozen=True)
class ForcedPrefix:
  """ids: int32 [rows, prefix_len], each row's prefix 0-padded (a row of
  0s has none). A prefix holds no PAD and no EOS."""
  ids: tf.Tensor

  def repeated(self, n):
    """Each row n times in a row (beams, samples)."""
    return ForcedPrefix(tf.repeat(self.ids, n, axis=0))

  def at(self, step):
    """(forcing bool [rows], tokens int32 [rows]): which rows write their
    prefix's token at position `step`, and that token."""
    padded = tf.pad(self.ids, [[0, 0], [0, 1]])  # a 0 past every prefix
    column = tf.minimum(step, tf.shape(self.ids)[1])
    tokens = tf.gather(padded, column, axis=1)
    return tokens != PAD_ID, tokens

  @staticmethod
  def force(forcing, forced, log_probs, tokens, model_logits, log_z,
            impossible):
    """Candidates with the prefix's token first on rows that are forced.

    Args:
      forcing, forced: `at(step)` of the position written.
      log_probs, tokens: a step's candidates, float32 and int32 [rows, k].
      model_logits: float32 [rows, V], the logits the forced token's score
        is read from; log_z: float32 [rows], their log-normalizers. Only
        the forced tokens' logits are normalized (no [rows, V] pass).
      impossible: the score of a candidate never chosen.
    Returns:
      (log_probs, tokens) [rows, k]: on forced rows the prefix's token with
      its log-probability, then k - 1 impossible candidates.
    """
    forced_score = tf.gather(model_logits, forced, batch_dims=1) - log_z
    # Shaped like the candidates (static k kept): the first column true.
    first = tf.equal(tf.cumsum(tf.ones_like(tokens), axis=1), 1)
    scores = tf.where(first, forced_score[:, tf.newaxis] +
                      tf.zeros_like(log_probs), impossible)
    forcing = forcing[:, tf.newaxis]
    return (tf.where(forcing, scores, log_probs),
            tf.where(forcing, tf.zeros_like(tokens) + forced[:, tf.newaxis],
                     tokens))


def encode_prefixes(target_vocab, prefixes, what="target prefix"):
  """Prefix texts to id lists ([] for an empty or blank text).

  Raises:
    ValueError: a prefix the vocabulary cannot encode (a piece it does not
      know, UNK), naming its index and text.
  """
  ids = []
  for index, text in enumerate(prefixes):
    tokens = (target_vocab.encode_text(text, add_eos=False)
              if text and text.strip() else [])
    if UNK_ID in tokens:
      raise ValueError(f"{what} {index + 1} ({text!r}): the target "
                       "vocabulary cannot encode it (it holds a piece the "
                       "vocabulary does not know)")
    if EOS_ID in tokens or PAD_ID in tokens:
      raise ValueError(f"{what} {index + 1} ({text!r}): encodes to EOS or "
                       "padding, which a prefix cannot hold")
    ids.append(list(tokens))
  return ids


def check_prefixes(prefix_ids, limits, what="target prefix"):
  """Raises ValueError naming the first prefix longer than its output's
  limit (`limits`: int per row, the tokens an output may hold)."""
  for index, (ids, limit) in enumerate(zip(prefix_ids, limits)):
    if len(ids) > limit:
      raise ValueError(f"{what} {index + 1} holds {len(ids)} tokens, more "
                       f"than its output may hold ({limit}: the input's "
                       "length + extra_length); shorten it or raise "
                       "extra_length")


def padded(prefix_ids):
  """int32 [rows, longest] of id lists, 0-padded (at least one column)."""
  longest = max([len(ids) for ids in prefix_ids] + [1])
  return tf.constant([ids + [PAD_ID] * (longest - len(ids))
                      for ids in prefix_ids], tf.int32,
                     shape=[len(prefix_ids), longest])
