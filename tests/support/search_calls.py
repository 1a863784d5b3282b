"""The searches called with their settings as keyword arguments, for tests
of hand-written step functions: each builds the `strategy.Beam` and
`step_rules.StepRules` the searches take whole.

    ids, scores = beam_search(step, cache, beam_size=2, max_decode_length=5)
"""
from t2tlite.decode import beam_search as searches
from t2tlite.decode import loop, sampling
from t2tlite.decode.step_rules import StepRules
from t2tlite.decode.strategy import Beam


def _rules(excluded_id, min_length, no_repeat_ngram_size):
  return StepRules(min_length, no_repeat_ngram_size, excluded_id, None)


def greedy_search(decode_step, initial_cache, max_decode_length,
                  max_lengths=None, excluded_id=None, min_length=0,
                  no_repeat_ngram_size=0):
  return searches.greedy_search(
      decode_step, initial_cache, max_decode_length,
      _rules(excluded_id, min_length, no_repeat_ngram_size), max_lengths)


def sample_search(decode_step, initial_cache, max_decode_length, sample,
                  keys, max_lengths=None, excluded_id=None, min_length=0):
  """Sampling's search (`strategy.Sample`) of rows with these keys (int64
  [rows], `sampling.expand`)."""
  return loop.search(decode_step, initial_cache,
                     sampling.SampleSearcher(sample, keys), max_decode_length,
                     _rules(excluded_id, min_length, 0), max_lengths)


def beam_search(decode_step, initial_cache, beam_size, max_decode_length,
                alpha=0.6, return_beams=False, max_lengths=None,
                excluded_id=None, min_length=0, no_repeat_ngram_size=0,
                drop_finished=False):
  return searches.beam_search(
      decode_step, initial_cache, Beam(beam_size, alpha, return_beams),
      max_decode_length, _rules(excluded_id, min_length,
                                no_repeat_ngram_size), max_lengths,
      drop_finished=drop_finished)
