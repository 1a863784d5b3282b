"""The decode settings as a log line: the strategy in use and only its own
settings, then the other settings that differ from their defaults."""
import pytest

from t2tlite.decode.describe import describe
from t2tlite.decode.settings import DecodeHParams


@pytest.mark.parametrize("text, line", [
    ("", "beam search: beam_size=4, alpha=0.6"),
    ("beam_size=8,alpha=1.0,return_beams=true",
     "beam search: beam_size=8, alpha=1, return_beams=True"),
    ("beam_size=1", "greedy search"),
    ("beam_size=1,return_beams=true", "greedy search: return_beams=True"),
    ("beam_size=1,min_length=2,int8=true",
     "greedy search; min_length=2, int8=True"),
    ("sampling_temperature=0.7",
     "sampling: sampling_temperature=0.7, sampling_seed=0, num_samples=1"),
    ("sampling_temperature=0.7,top_k=40,top_p=0.9,sampling_seed=3,"
     "num_samples=5,no_repeat_ngram_size=3",
     "sampling: sampling_temperature=0.7, top_k=40, top_p=0.9, "
     "sampling_seed=3, num_samples=5; no_repeat_ngram_size=3"),
    ("sampling_temperature=1.0,epsilon=0.02",
     "sampling: sampling_temperature=1, epsilon=0.02, sampling_seed=0, "
     "num_samples=1"),
])
def test_describe_names_the_strategy_and_its_own_settings(text, line):
  assert describe(DecodeHParams.parse(text)) == line


def test_sampling_does_not_list_beam_settings():
  line = describe(DecodeHParams.parse("sampling_temperature=1.0,beam_size=6"))
  assert "beam" not in line and "alpha" not in line, line
  assert "DecodeHParams(" not in line
