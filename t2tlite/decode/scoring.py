"""Scoring given pairs: the model's log-probability of a target sentence
given its source, per token and in total (to filter or rerank corpora).

    scorer = Scorer(model, vocab, target_vocab)
    results = scorer.score_lines(sources, targets, batch_size=64)
    results[0].total, results[0].normalized, results[0].tokens

A pair's per-token log-probabilities are those the searches compute at each
step (PAD excluded from the distribution, as the searches exclude it), so
the total is greedy search's score, and beam search's before its length
penalty, for the same output. The target's EOS is scored too: a sentence's
probability includes ending where it ends.
"""
import dataclasses

import tensorflow as tf

from t2tlite.decode.step_rules import IMPOSSIBLE_LOG_PROB
from t2tlite.ids import EOS_ID, PAD_ID


def token_log_probs(model, inputs, targets):
  """Teacher-forced log-probabilities of each target token.

  Args:
    model: a Transformer.
    inputs: int32 [batch, src_len] source ids ending with EOS, 0-padded.
    targets: int32 [batch, tgt_len] target ids ending with EOS, 0-padded.
  Returns:
    float32 [batch, tgt_len]: log P(target token | source, earlier tokens),
    0 at padding.
  """
  logits = tf.cast(model({"inputs": inputs, "targets": targets},
                         training=False), tf.float32)
  # The searches never choose PAD (it is no output token): score over the
  # same distribution.
  pad = tf.one_hot(PAD_ID, tf.shape(logits)[-1], dtype=logits.dtype)
  logits += IMPOSSIBLE_LOG_PROB * pad
  chosen = tf.gather(logits, targets, batch_dims=2)
  log_probs = chosen - tf.reduce_logsumexp(logits, axis=-1)
  return tf.where(targets != PAD_ID, log_probs, tf.zeros_like(log_probs))


def summarize(token_scores, targets):
  """{"scores": float32 [batch] total log-probability, "normalized_scores":
  float32 [batch] its mean over the target's tokens (EOS included),
  "lengths": int32 [batch] tokens scored, "token_scores": float32
  [batch, tgt_len]} from `token_log_probs`' output."""
  lengths = tf.reduce_sum(tf.cast(targets != PAD_ID, tf.int32), axis=1)
  total = tf.reduce_sum(token_scores, axis=1)
  normalized = total / tf.cast(tf.maximum(lengths, 1), tf.float32)
  return {"scores": total, "normalized_scores": normalized,
          "lengths": lengths, "token_scores": token_scores}


@dataclasses.dataclass(frozen=True)
class PairScore:
  """One pair's scores: total log-probability, its mean per target token
  (EOS included), and each token's (the target's pieces, then EOS)."""
  total: float
  normalized: float
  tokens: list


class Scorer:
  """A model and its vocabularies with a traced scoring function.

  Args:
    model: a trained Transformer.
    vocab: its (input) Vocabulary.
    target_vocab: its targets' Vocabulary; None: vocab.
  """

  def __init__(self, model, vocab, target_vocab=None):
    self.model, self.vocab = model, vocab
    self.target_vocab = target_vocab or vocab
    spec = tf.TensorSpec([None, None], tf.int32)
    self._score = tf.function(
        lambda inputs, targets: token_log_probs(model, inputs, targets),
        input_signature=[spec, spec], autograph=False)

  def encode(self, sources, targets):
    """(source id lists, target id lists), each ending with EOS."""
    def ids(vocab, lines):
      if not lines:
        return []
      encoded = vocab.encode(tf.constant(lines, tf.string)).to_list()
      return [row + [EOS_ID] for row in encoded]
    return ids(self.vocab, sources), ids(self.target_vocab, targets)

  def score_ids(self, source_ids, target_ids, batch_size=64):
    """Scores pairs of id lists (each ending with EOS) in batches of similar
    length; returns a PairScore per pair, in input order."""
    results = [None] * len(source_ids)
    order = sorted(range(len(source_ids)),
                   key=lambda i: (-len(source_ids[i]) - len(target_ids[i]),
                                  i))
    for start in range(0, len(order), batch_size):
      batch = order[start:start + batch_size]
      inputs = _padded([source_ids[i] for i in batch])
      targets = _padded([target_ids[i] for i in batch])
      scores = self._score(inputs, targets).numpy()
      for row, i in enumerate(batch):
        tokens = scores[row, :len(target_ids[i])].tolist()
        total = float(sum(tokens))
        results[i] = PairScore(total, total / len(tokens), tokens)
    return results

  def score_lines(self, sources, targets, batch_size=64):
    """Scores pairs of text lines; a PairScore per pair, in input order."""
    return self.score_ids(*self.encode(sources, targets), batch_size)


def _padded(rows):
  width = max(len(r) for r in rows)
  return tf.constant([r + [PAD_ID] * (width - len(r)) for r in rows],
                     tf.int32)
