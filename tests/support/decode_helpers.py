"""Decoding in tests: `search.decode` with its plan built from decode
hparams given as keyword arguments (`DecodeHParams` fields: their
defaults are the only ones), settled (`machine.settle`), one search unless
concurrent_searches says.

    result = decode_ids(model, inputs, beam_size=2, extra_length=5)
    decoder = decoder_of(model, vocab, extra_length=0)
"""
from t2tlite.decode import machine, search
from t2tlite.decode.settings import DecodeHParams
from t2tlite.decode.strategy import DecodePlan


def settled_of(**hparams):
  """DecodeHParams(**hparams) settled, concurrent_searches 1 by default."""
  hparams.setdefault("concurrent_searches", 1)
  return machine.settle(DecodeHParams(**hparams))


def plan_of(**hparams):
  """The DecodePlan of `settled_of(**hparams)`."""
  return DecodePlan.from_settled(settled_of(**hparams))


def decoder_of(model, vocab, **hparams):
  """A text-to-text `Decoder` of `model` and its `vocab`, decoding with
  `settled_of(**hparams)`."""
  from t2tlite.decode.decoding import Decoder
  return Decoder(model, vocab, settled_of(**hparams))


def decode_ids(model, inputs, constraint=None, search_weights=None,
               target_prefix=None, static_shapes=False, **hparams):
  """`search.decode(model, inputs, plan_of(**hparams), ...)`."""
  return search.decode(model, inputs, plan_of(**hparams), constraint,
                       search_weights, target_prefix, static_shapes)
