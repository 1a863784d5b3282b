"""Target prefixes (`t2tlite.decode.prefix`): every output starts with its
row's prefix, in greedy search, beam search (every beam), sampling,
concurrent searches and ensembles; rows without one decode as they would
alone; past the prefix the search goes on as from that prefix; prefixes
longer than their limit fail with one line, and so do prefixes the target
vocabulary cannot encode; a Decoder gives each line its own prefix."""
import numpy as np
import pytest
import tensorflow as tf

from decode_helpers import decode_ids, decoder_of
from shared_run import shared_trained_run
from t2tlite.data.vocab import EOS_ID
from t2tlite.decode import prefix as prefix_lib
from t2tlite.decode.ensemble import Ensemble
from t2tlite.hparams_lib import HParams
from t2tlite.models import build_model

INPUTS = tf.constant([[5, 9, 12, 7, EOS_ID, 0, 0],
                      [3, 4, EOS_ID, 0, 0, 0, 0],
                      [8, 8, 30, 31, 32, 17, EOS_ID]])
PREFIXES = tf.constant([[7, 7, 3], [0, 0, 0], [25, 0, 0]])
SEARCHES = {
    "greedy": dict(beam_size=1),
    "beam": dict(beam_size=3, return_beams=True),
    "sampling": dict(sampling_temperature=1.5, sampling_seed=3,
                     num_samples=2),
    "two_searches": dict(beam_size=2, concurrent_searches=2),
}


def _starts(outputs, prefixes=PREFIXES):
  outputs = outputs.numpy()
  for row, prefix in zip(outputs, prefixes.numpy().tolist()):
    prefix = [t for t in prefix if t]
    for output in row.reshape(-1, row.shape[-1]):
      assert output[:len(prefix)].tolist() == prefix


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_every_output_starts_with_its_prefix(tiny_model, search):
  hp = dict(SEARCHES[search], extra_length=6)
  result = decode_ids(tiny_model, INPUTS, target_prefix=PREFIXES, **hp)
  _starts(result["outputs"])
  # A row without a prefix decodes as without any.
  plain = decode_ids(tiny_model, INPUTS, **hp)
  np.testing.assert_array_equal(result["outputs"][1], plain["outputs"][1])
  np.testing.assert_allclose(result["scores"][1], plain["scores"][1],
                             rtol=1e-6)


def test_an_ensemble_starts_with_the_prefix(tiny_model):
  result = decode_ids(Ensemble([tiny_model, tiny_model]), INPUTS,
                      target_prefix=PREFIXES, beam_size=2, extra_length=6)
  _starts(result["outputs"])


def test_greedy_goes_on_as_from_the_prefix(tiny_model):
  """A greedy output's own first tokens as its prefix give it back, with
  its score (the prefix scored with the model's log-probabilities)."""
  greedy = decode_ids(tiny_model, INPUTS, beam_size=1, extra_length=6)
  own = greedy["outputs"][:, :2]
  again = decode_ids(tiny_model, INPUTS, target_prefix=own, beam_size=1,
                     extra_length=6)
  np.testing.assert_array_equal(again["outputs"], greedy["outputs"])
  np.testing.assert_allclose(again["scores"], greedy["scores"], rtol=1e-5)


def test_a_prefix_longer_than_the_limit_fails(tiny_model):
  # Row 2 may hold 3 + 2 tokens.
  long = tf.constant([[0] * 6, [3] * 6, [0] * 6])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="target prefix longer than its output may hold"):
    decode_ids(tiny_model, INPUTS, target_prefix=long, beam_size=1,
               extra_length=2)
  with pytest.raises(ValueError, match=r"target prefix 2 holds 6 tokens, "
                     r"more than its output may hold \(5"):
    prefix_lib.check_prefixes([[], [3] * 6], [9, 5])


def test_a_prefix_too_long_for_concurrent_searches_fails_with_its_reason(
    tiny_model):
  """Traced as an export traces it: the check's message reaches the
  caller at every call, never the cancellation of the other search's call
  (which, checked inside each search, came back about half the time)."""
  search = tf.function(
      lambda ids, prefixes: decode_ids(
          tiny_model, ids, target_prefix=prefixes, beam_size=2,
          extra_length=2, concurrent_searches=2),
      input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2,
      autograph=False)
  fits = search(INPUTS, tf.zeros([3, 10], tf.int32))
  assert fits["outputs"].shape[0] == 3
  # 10 tokens: more than any row may hold (at most 7 + 2); each row in
  # turn, so that either search's block holds the one too long.
  for row in (0, 1, 2) * 4:
    long = tf.tensor_scatter_nd_update(tf.zeros([3, 10], tf.int32),
                                       [[row]], [[3] * 10])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="target prefix longer than its output may hold"):
      search(INPUTS, long)



def test_a_prefix_as_long_as_its_limit_passes_the_check():
  prefix_lib.check_prefixes([[3] * 5, [], [4] * 2], [5, 0, 3])


def test_prefixes_are_padded_at_their_end():
  padded = prefix_lib.padded([[4, 5, 6], [], [7]])
  assert padded.numpy().tolist() == [[4, 5, 6], [0, 0, 0], [7, 0, 0]]
  assert prefix_lib.padded([[], []]).numpy().tolist() == [[0], [0]]


def test_beams_after_a_prefix_are_distinct(tiny_model):
  """The prefix's token is the one candidate of a forced step, so the
  beams past the prefix are different hypotheses, not copies of one."""
  result = decode_ids(tiny_model, INPUTS, target_prefix=PREFIXES,
                      beam_size=3, return_beams=True, extra_length=6)
  _starts(result["outputs"])
  for beams in result["outputs"].numpy().tolist():
    assert len({tuple(beam) for beam in beams}) == 3


def test_one_prefixed_line_over_two_searches(tiny_model):
  """One row for two searches: the other searches an empty block."""
  hp = dict(beam_size=2, extra_length=6)
  one = decode_ids(tiny_model, INPUTS[2:], target_prefix=PREFIXES[2:], **hp)
  two = decode_ids(tiny_model, INPUTS[2:], target_prefix=PREFIXES[2:],
                   concurrent_searches=2, **hp)
  _starts(two["outputs"], PREFIXES[2:])
  np.testing.assert_array_equal(two["outputs"], one["outputs"])
  np.testing.assert_allclose(two["scores"], one["scores"], rtol=1e-5)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(model, Vocabulary) of the session's shared tiny run."""
  _, model, vocab = shared_trained_run(tmp_path_factory)
  return model, vocab


def test_a_prefix_the_vocabulary_cannot_encode_is_named(trained):
  _, vocab = trained
  ids = prefix_lib.encode_prefixes(vocab, ["Ein Hund", "", "  "])
  assert ids == [vocab.encode_text("Ein Hund", add_eos=False), [], []]
  assert ids[0]
  with pytest.raises(ValueError, match=r"^target prefix 3 \('\u65e5\u672c'\)"
                     ": the target vocabulary cannot encode it"):
    prefix_lib.encode_prefixes(vocab, ["Ein", "", "\u65e5\u672c"])


def test_a_decoders_prefix_may_fill_its_output_but_not_more(trained):
  """A line's output holds its tokens, its EOS and extra_length more."""
  _, vocab = trained
  line, prefix = "A dog.", "Ein Hund läuft über eine grüne Wiese."
  tokens = len(vocab.encode_text(prefix, add_eos=False))
  room = tokens - len(vocab.encode_text(line, add_eos=True))
  assert room > 0
  outputs, _ = decoder_of(*trained, extra_length=room).decode_batch(
      [line], [prefix])
  assert outputs == [prefix]
  with pytest.raises(ValueError, match=rf"target prefix 2 holds {tokens} "
                     rf"tokens, more than its output may hold \({tokens - 1}:"):
    decoder_of(*trained, extra_length=room - 1).prefix_ids(
        ["", line], ["", prefix])


def test_a_learned_position_table_caps_what_a_prefix_may_fill(trained):
  """With learned positions an output holds at most max_length tokens,
  however long its line: so does the prefix check."""
  _, vocab = trained
  model = build_model(HParams(num_layers=1, d_model=16, d_ff=32,
                              num_heads=2, d_k=8, d_v=8, max_length=8,
                              position_encoding="learned"), vocab.size)
  decoder = decoder_of(model, vocab, extra_length=50)
  line = "Two young men are playing football in a park."
  assert len(vocab.encode_text(line)) + 50 > 8
  fits = " ".join(["ein"] * 20)
  ids = vocab.encode_text(fits, add_eos=False)
  eight = vocab.decode_ids(ids[:8])
  decoder.prefix_ids([line], [eight])
  with pytest.raises(ValueError, match=r"target prefix 1 holds 9 tokens, "
                     r"more than its output may hold \(8"):
    decoder.prefix_ids([line], [vocab.decode_ids(ids[:9])])


def test_decode_lines_gives_each_line_its_own_prefix(trained):
  # Decoded longest first, one batch: not in the lines' order.
  lines = ["A dog.", "", "Two young men are playing football in a park."]
  prefixes = ["Ein Hund", "Leer", "Zwei"]
  outputs, _ = decoder_of(*trained, extra_length=4).decode_lines(
      lines, progress=False, prefixes=prefixes)
  assert outputs[1] == ""
  assert outputs[0].startswith("Ein Hund")
  assert outputs[2].startswith("Zwei")
