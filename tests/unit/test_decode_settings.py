"""Decode settings have one parser (`DecodeHParams.parse`) and one entry
(`problem_decoding.decode_hparams`): a problem's defaults, or a base kept
parsed (an export's, a server's), with overrides on top."""
import pytest

import t2tlite.problems  # noqa: F401  (registers the built-in problems)
from t2tlite import problem as problem_lib
from t2tlite import problem_decoding
from t2tlite.decode.settings import DecodeHParams

PARSING = "parsing_wsj"


def test_a_problems_defaults_then_the_overrides():
  defaults = DecodeHParams.parse(problem_lib.decode_defaults(PARSING))
  assert defaults != DecodeHParams()  # parsing sets its own
  hp = problem_decoding.decode_hparams(PARSING, "beam_size=3")
  assert hp.beam_size == 3
  assert (hp.alpha, hp.extra_length) == (defaults.alpha, defaults.extra_length)


def test_overrides_on_a_base_keep_the_bases_other_fields():
  base = DecodeHParams(beam_size=2, alpha=0.0, extra_length=7)
  hp = problem_decoding.decode_hparams(PARSING, "alpha=0.5", base)
  assert (hp.beam_size, hp.alpha, hp.extra_length) == (2, 0.5, 7)
  assert problem_decoding.decode_hparams(PARSING, "", base) == base


@pytest.mark.parametrize("overrides, message", [
    ("beam_sise=2", "beam_sise"),
    ("beam_size=two", "beam_size='two': expected a int"),
    ("beam_size=0", "beam_size must be >= 1"),
    ("batch_size=0", "batch_size must be >= 1, got 0"),
    ("num_samples=3", "num_samples=3 samples: it needs sampling_temperature"),
    ("top_k=5", "top_k=5 samples"),
])
def test_a_bad_override_names_itself(overrides, message):
  with pytest.raises(ValueError, match=message):
    problem_decoding.decode_hparams(PARSING, overrides, DecodeHParams())


def test_an_exports_record_leaves_out_fields_it_does_not_know():
  record = dict(vars(DecodeHParams(beam_size=3)), field_of_later=1)
  assert DecodeHParams.from_record(record) == DecodeHParams(beam_size=3)
