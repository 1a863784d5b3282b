"""Decoding settings in one line, as a person reads them in a log: the
strategy in use with its own settings only (a sampling run does not list
beam_size), then the other settings that differ from their defaults.

    describe(DecodeHParams())  # "beam search: beam_size=4, alpha=0.6"
    describe(DecodeHParams(beam_size=1, min_length=2))
    # "greedy search; min_length=2"
"""
import dataclasses

from t2tlite.decode import strategy as strategy_lib


def strategy(hp):
  """"sampling", "greedy search" or "beam search"."""
  return strategy_lib.of(hp).name


def _setting(hp, field):
  value = getattr(hp, field)
  return f"{field}={value:g}" if isinstance(value, float) else (
      f"{field}={value}")


def describe(hp):
  """One line naming `hp`'s strategy and the settings that act on it."""
  chosen = strategy_lib.of(hp)
  own = chosen.shown(hp)
  others = [field.name for field in dataclasses.fields(hp)
            if field.name not in strategy_lib.STRATEGY_HPARAMS and
            getattr(hp, field.name) != field.default]
  return (chosen.name + (": " if own else "") +
          ", ".join(_setting(hp, field) for field in own) +
          ("; " if others else "") +
          ", ".join(_setting(hp, field) for field in others))
