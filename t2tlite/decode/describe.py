"""Decoding settings in one line, as a person reads them in a log: the
strategy in use with its own settings only (a sampling run does not list
beam_size), then the other settings that differ from their defaults.

    describe(DecodeHParams())  # "beam search: beam_size=4, alpha=0.6"
    describe(DecodeHParams(beam_size=1, min_length=2))
    # "greedy search; min_length=2"
"""
import dataclasses

from t2tlite.decode.settings import DecodeHParams

_SAMPLING = ("sampling_temperature", "top_k", "top_p", "epsilon",
             "sampling_seed", "num_samples")
_BEAM = ("beam_size", "alpha", "return_beams")
_DEFAULTS = DecodeHParams()


def strategy(hp):
  """"sampling", "greedy search" or "beam search"."""
  if hp.sampling:
    return "sampling"
  return "greedy search" if hp.beam_size == 1 else "beam search"


def _setting(hp, field):
  value = getattr(hp, field)
  return f"{field}={value:g}" if isinstance(value, float) else (
      f"{field}={value}")


def describe(hp):
  """One line naming `hp`'s strategy and the settings that act on it."""
  name = strategy(hp)
  if name == "sampling":
    own = ["sampling_temperature"] + [
        field for field in ("top_k", "top_p", "epsilon")
        if getattr(hp, field) != getattr(_DEFAULTS, field)] + [
            "sampling_seed", "num_samples"]
  else:  # greedy search reads return_beams too (a beam axis of one)
    own = (["beam_size", "alpha"] if name == "beam search" else []) + (
        ["return_beams"] if hp.return_beams else [])
  others = [field.name for field in dataclasses.fields(hp)
            if field.name not in _SAMPLING + _BEAM and
            getattr(hp, field.name) != field.default]
  return (name + (": " if own else "") +
          ", ".join(_setting(hp, field) for field in own) +
          ("; " if others else "") +
          ", ".join(_setting(hp, field) for field in others))
