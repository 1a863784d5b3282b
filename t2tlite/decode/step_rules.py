"""One search step's choice of next tokens, shared by greedy search,
sampling and beam search: the model's logits in, the tokens the strategy
chooses and their log-probabilities out, with every rule an output obeys
applied here, in one order (`StepRules.next_tokens`):

- no-repeat n-grams (`no_repeat_ngram_size`);
- exclusions: the padding id never, EOS not before `min_length`
  (left out of the choice and of the distribution);
- the normalizer and the strategy's choice (`most_probable`: the k best,
  `vocab_top_k`; `drawn`: sampling);
- target prefixes (`prefix.ForcedPrefix`).

A problem's decoding constraint (`constraints.constrain`) masks the logits
in the step function itself, as it keeps state in the search's cache.
A new rule is written once, here.
"""
import dataclasses
from typing import Optional

import tensorflow as tf

from t2tlite.decode.prefix import ForcedPrefix
from t2tlite.decode.vocab_top_k import (excluded, log_normalizer,
                                        log_normalizer_and_top_k)
from t2tlite.ids import EOS_ID

# The score of a hypothesis (or token) that must never be chosen: a finite
# "minus infinity", so that score arithmetic never meets inf - inf = nan.
# It is much smaller in magnitude than attention's MASK_BIAS because scores
# are sums: at 1e7 float32 values are spaced 1 apart (64 apart at 1e9), so
# an impossible score plus a log-probability still keeps that log-probability
# to the nearest unit.
IMPOSSIBLE_LOG_PROB = -1e7


@dataclasses.dataclass(frozen=True)
class StepRules:
  """The rules of every step of one search.

  min_length: EOS is left out at steps < min_length (0: never).
  no_repeat_ngram_size: n > 0: a token that would complete an n-gram
    already in its row's sequence is impossible; 0: off.
  excluded_id: None, or a token id never chosen (the padding id).
  prefix: None, or a ForcedPrefix over the search's rows.
  """
  min_length: int
  no_repeat_ngram_size: int
  excluded_id: Optional[int]
  prefix: Optional[ForcedPrefix]

  @classmethod
  def of(cls, limits, excluded_id, prefix):
    """The rules of `strategy.OutputLimits`."""
    return cls(limits.min_length, limits.no_repeat_ngram_size, excluded_id,
               prefix)

  def repeated(self, n):
    """The rules over rows repeated n times each (beams)."""
    if self.prefix is None:
      return self
    return dataclasses.replace(self, prefix=self.prefix.repeated(n))

  def row_tensors(self):
    """The rules' tensors with a row each, a nest (empty without a prefix):
    what a search that drops rows gathers with them."""
    return {} if self.prefix is None else {"prefix": self.prefix.ids}

  def with_row_tensors(self, tensors):
    """These rules over the rows of `tensors` (from `row_tensors`)."""
    if self.prefix is None:
      return self
    return dataclasses.replace(self, prefix=ForcedPrefix(tensors["prefix"]))

  def _exclusions(self, step):
    """(excluded_ids, excluding) for `log_normalizer_and_top_k` at `step`:
    excluded_id always, EOS while step < min_length."""
    tokens, flags = [], []
    if self.excluded_id is not None:
      tokens.append(self.excluded_id)
      flags.append(tf.constant(True))
    if self.min_length:
      tokens.append(EOS_ID)
      flags.append(step < self.min_length)
    return tuple(tokens), (tf.stack(flags) if tokens else None)

  def _without_repeats(self, logits, seqs, step):
    if not self.no_repeat_ngram_size:
      return logits
    return without_repeats(logits, seqs, step, self.no_repeat_ngram_size)

  def next_tokens(self, logits, seqs, step, choose):
    """The tokens a strategy chooses for each row, and their
    log-probabilities, with the rules in one order for every search: the
    model's logits, no-repeat n-grams, exclusions (out of the choice and
    the normalizer), the choice (`most_probable`, `drawn`), then target
    prefixes (forced tokens scored with the model's log-probability).

    Args:
      logits: [rows, V] the model's next-token logits.
      seqs: int32 [rows, max_len], the tokens of positions < step written
        (None when no_repeat_ngram_size is 0: unread).
      step: int32 scalar, the position written.
      choose: callable(logits float32 [rows, V], excluded_ids, excluding)
        -> (log_z float32 [rows], log_probs float32 [rows, k], tokens
        int32 [rows, k]): the strategy's choice (`most_probable`,
        `drawn`).
    Returns:
      (log_probs float32 [rows, k], tokens int32 [rows, k]).
    """
    logits = tf.cast(logits, tf.float32)
    model_logits = logits
    logits = self._without_repeats(logits, seqs, step)
    excluded_ids, excluding = self._exclusions(step)
    log_z, log_probs, tokens = choose(logits, excluded_ids, excluding)
    if self.prefix is not None:
      forcing, forced = self.prefix.at(step)
      if self.no_repeat_ngram_size:
        # A forced token may be one no-repeat bans: its normalizer holds
        # the banned tokens too (else its probability could exceed 1). A
        # pass over the vocabulary, made only at steps that force a row.
        log_z = tf.cond(
            tf.reduce_any(forcing),
            lambda: log_normalizer(model_logits, excluded_ids, excluding),
            lambda: log_z)
      log_probs, tokens = self.prefix.force(
          forcing, forced, log_probs, tokens, model_logits, log_z,
          IMPOSSIBLE_LOG_PROB)
    return log_probs, tokens

  def top_candidates(self, logits, seqs, step, k):
    """The k most probable allowed tokens of each row (`next_tokens` with
    `most_probable(k)`): (log_probs float32 [rows, k'] in descending order,
    tokens int32 [rows, k']), k' = min(k, V - excluded ids) (static)."""
    return self.next_tokens(logits, seqs, step, most_probable(k))

  def picked(self, logits, seqs, step, pick):
    """The token `pick` draws for each row (`next_tokens` with `drawn`):
    (log_probs float32 [rows], tokens int32 [rows])."""
    log_probs, tokens = self.next_tokens(logits, seqs, step,
                                         drawn(pick, step))
    return log_probs[:, 0], tokens[:, 0]


def most_probable(k):
  """`next_tokens`' choice of the k most probable allowed tokens (greedy
  and beam search): excluded ids leave the top-k and the normalizer in one
  pass (`log_normalizer_and_top_k`)."""

  def choose(logits, excluded_ids, excluding):
    vocab = logits.shape[-1]
    n = k if vocab is None else min(k, vocab - len(excluded_ids))
    log_z, values, tokens = log_normalizer_and_top_k(
        logits, n, excluded_ids, excluding)
    return log_z, values - log_z[:, tf.newaxis], tokens

  return choose


def drawn(pick, step):
  """`next_tokens`' choice of one token a row drawn by `pick`
  (callable(logits float32 [rows, V], step) -> int32 [rows]): excluded ids
  are masked in the logits it draws from."""

  def choose(logits, excluded_ids, excluding):
    if excluded_ids:
      hidden = excluded(tf.range(tf.shape(logits)[-1]), excluded_ids,
                        excluding)
      logits += IMPOSSIBLE_LOG_PROB * tf.cast(hidden, logits.dtype)
    log_z = tf.reduce_logsumexp(logits, axis=-1)
    chosen = pick(logits, step)
    log_probs = tf.gather(logits, chosen, batch_dims=1) - log_z
    return log_z, log_probs[:, tf.newaxis], chosen[:, tf.newaxis]

  return choose


NO_RULES = StepRules(min_length=0, no_repeat_ngram_size=0, excluded_id=None,
                     prefix=None)


def without_repeats(logits, seqs, step, n):
  """`logits` for position `step` with every token that would complete an
  n-gram already in its sequence set to IMPOSSIBLE_LOG_PROB (decode hparam
  no_repeat_ngram_size, as fairseq's --no-repeat-ngram-size).

  Args:
    logits: float32 [rows, vocab].
    seqs: int32 [rows, max_len], the tokens of positions < step written.
    step: int32 scalar.
    n: int >= 1 (Python): the n-gram size.
  Returns:
    float32 [rows, vocab].
  """
  rows, max_len = tf.shape(seqs)[0], tf.shape(seqs)[1]
  # Window j: a prefix at j .. j + n - 2, then a token; none when n is
  # longer than the buffer. Ops, not a loop over n: the graph's size does
  # not grow with n (a decode hparam a server's request may set).
  starts = tf.range(tf.maximum(max_len - n + 1, 0))
  offsets = tf.range(tf.minimum(n - 1, max_len))
  prefixes = tf.gather(seqs, starts[:, tf.newaxis] + offsets, axis=1)
  current = tf.gather(seqs, tf.maximum(step - n + 1 + offsets, 0), axis=1)
  # Window j matches if its prefix is the n - 1 tokens before `step` and its
  # token was written (j + n - 1 < step): that token is banned.
  match = (tf.reduce_all(tf.equal(prefixes, current[:, tf.newaxis]), axis=-1)
           & (starts < step - n + 1))
  banned = tf.gather(seqs, starts + n - 1, axis=1)
  row_ids = tf.broadcast_to(tf.range(rows)[:, tf.newaxis], tf.shape(banned))
  indices = tf.stack([row_ids, tf.where(match, banned, 0)], axis=-1)
  # A min with +inf leaves the windows that do not match as they were.
  updates = tf.where(match, IMPOSSIBLE_LOG_PROB, float("inf"))
  return tf.tensor_scatter_nd_min(logits, tf.reshape(indices, [-1, 2]),
                                  tf.reshape(updates, [-1]))
