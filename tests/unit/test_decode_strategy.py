"""Decode strategies with behaviour (`t2tlite.decode.strategy`): the class
decode hparams choose, the outputs an input gets, epsilon sampling as a
class of its own, sampling's encoder run once per input, the ids an output
is given back with (`decoding.output_ids`), and text in and out of the
search (`decoding.encode_inputs`, `decoding.decode_strings`)."""
import numpy as np
import pytest
import tensorflow as tf

from decode_helpers import decode_ids
from t2tlite.data.vocab import EOS_ID
from t2tlite.decode import machine, sampling, strategy
from t2tlite.decode.decoding import (Decoder, decode_strings,
                                     encode_inputs, output_ids)
from t2tlite.decode.settings import DecodeHParams

from shared_run import shared_trained_run

SAMPLING = dict(sampling_temperature=1.0, sampling_seed=3)


@pytest.mark.parametrize("hparams, kind, outputs, rows, listed", [
    (dict(beam_size=1), strategy.Greedy, 1, 1, False),
    (dict(beam_size=1, return_beams=True), strategy.Greedy, 1, 1, True),
    (dict(beam_size=2), strategy.Beam, 1, 2, False),
    (dict(beam_size=3), strategy.Beam, 1, 3, False),
    (dict(beam_size=3, return_beams=True), strategy.Beam, 3, 3, True),
    (dict(SAMPLING), strategy.Sample, 1, 1, False),
    (dict(SAMPLING, num_samples=4), strategy.Sample, 4, 4, True),
    (dict(SAMPLING, epsilon=0.02, num_samples=2), strategy.EpsilonSample, 2,
     2, True),
])
def test_the_strategy_says_how_many_outputs_an_input_gets(
    hparams, kind, outputs, rows, listed):
  hp = DecodeHParams(**hparams)
  chosen = strategy.of(hp)
  assert type(chosen) is kind  # pylint: disable=unidiomatic-typecheck
  assert chosen.outputs_per_input == outputs
  assert chosen.rows_per_input == rows
  assert chosen.multiple_outputs is listed
  # The settings' own properties are the strategy's.
  assert hp.multiple_outputs is listed
  assert hp.outputs_per_input == rows
  assert hp.width_hparam == ("num_samples" if hp.sampling else "beam_size")
  # An n-best lists every output: every beam, or the samples as they are.
  every = hp.with_every_output()
  assert strategy.of(every).outputs_per_input == rows
  assert every == (hp if hp.sampling else
                   DecodeHParams(**dict(hparams, return_beams=True)))


def test_a_plan_carries_each_output_limit_of_its_hparams():
  hp = DecodeHParams(beam_size=2, extra_length=7, min_length=3,
                     no_repeat_ngram_size=2, concurrent_searches=1)
  plan = strategy.DecodePlan.from_settled(machine.settle(hp))
  assert plan.limits == strategy.OutputLimits(
      extra_length=7, min_length=3, no_repeat_ngram_size=2)
  assert plan.strategy == strategy.Beam(size=2, alpha=0.6, return_beams=False)
  assert plan.concurrent_searches == 1 and not plan.int8


def test_epsilon_sampling_is_a_strategy_of_its_own():
  hp = DecodeHParams(**SAMPLING, top_k=5, epsilon=0.05)
  chosen = strategy.of(hp)
  assert chosen == strategy.EpsilonSample(1.0, 5, 1.0, 3, 1, 0.05)
  assert isinstance(chosen, strategy.Sample)
  logits = tf.random.stateless_normal([64, 30], [1, 2]) * 3.0
  u = tf.random.stateless_uniform([64], [3, 4])
  # Its draw is plain sampling's after its truncation.
  np.testing.assert_array_equal(
      chosen.draw(logits, u).numpy(),
      sampling.draw(sampling.without_improbable(logits, 0.05), u,
                    top_k=5).numpy())
  plain = strategy.of(DecodeHParams(**SAMPLING, top_k=5))
  np.testing.assert_array_equal(
      plain.draw(logits, u).numpy(),
      sampling.draw(logits, u, top_k=5).numpy())


def test_sampling_runs_the_encoder_once_per_input(tiny_model):
  inputs = tf.constant([[5, 9, 12, EOS_ID], [3, 4, EOS_ID, 0]])
  encoded = []
  prepare = tiny_model.prepare_decoding

  def counted(rows, *args, **kwargs):
    encoded.append(int(rows.shape[0]))
    return prepare(rows, *args, **kwargs)

  tiny_model.prepare_decoding = counted
  try:
    result = decode_ids(tiny_model, inputs, extra_length=4, num_samples=3,
                        **SAMPLING)
  finally:
    del tiny_model.prepare_decoding
  assert encoded == [2]
  assert result["outputs"].shape[:2] == (2, 3)


def test_greedy_with_return_beams_gives_its_output_a_beam_axis(tiny_model):
  inputs = tf.constant([[5, 9, 12, EOS_ID], [3, 4, EOS_ID, 0]])
  plain = decode_ids(tiny_model, inputs, beam_size=1, extra_length=4)
  listed = decode_ids(tiny_model, inputs, beam_size=1, extra_length=4,
                      return_beams=True)
  for key in ("outputs", "scores"):
    np.testing.assert_array_equal(listed[key].numpy(),
                                  plain[key].numpy()[:, np.newaxis])


def test_an_outputs_ids_end_with_its_eos_or_run_to_its_limit():
  # The ids a returned output's attention is computed on: up to EOS and
  # with it; a row cut at its length limit has no EOS and keeps its tokens.
  assert output_ids(np.array([5, 6, EOS_ID, 7, 0, 0])) == [5, 6, EOS_ID]
  assert output_ids(np.array([EOS_ID, 0, 0])) == [EOS_ID]
  assert output_ids(np.array([5, 6, 7, 0])) == [5, 6, 7]


def test_blank_lines_get_lists_of_their_own(tiny_model):
  """Several outputs an input: each blank line's empty outputs and scores
  are lists of their own (a caller filling one in leaves the others)."""
  hp = machine.settle(DecodeHParams(beam_size=2, return_beams=True))
  outputs, scores = Decoder(tiny_model, None, hp).decode_lines(
      ["", "  "], progress=False)
  assert outputs == [["", ""], ["", ""]] and scores == [[0.0, 0.0]] * 2
  outputs[0][0], scores[0][0] = "filled", -1.0
  assert outputs[1] == ["", ""] and scores[1] == [0.0, 0.0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(model, Vocabulary) of the session's shared tiny run (untrained
  weights: most outputs run to their length limit)."""
  _, model, vocab = shared_trained_run(tmp_path_factory)
  return model, vocab


def test_inputs_are_their_pieces_then_eos_then_padding(trained):
  _, vocab = trained
  lines = ["Two young men play football.", "", "A dog."]
  pieces = [vocab.encode_text(line, add_eos=False) for line in lines]
  width = max(len(p) for p in pieces) + 1
  want = [p + [EOS_ID] + [0] * (width - len(p) - 1) for p in pieces]
  assert pieces[1] == [] and len(pieces[0]) > len(pieces[2]) > 0
  assert encode_inputs(vocab, tf.constant(lines)).numpy().tolist() == want


def test_a_blank_string_decodes_to_nothing(trained):
  """Spaces alone are blank too: "" out, though the search ran on EOS."""
  model, vocab = trained
  settled = machine.settle(DecodeHParams(extra_length=4,
                                         concurrent_searches=1))
  result = decode_strings(model, vocab, tf.constant(["A dog.", "  ", ""]),
                          settled)
  assert result["outputs"].numpy().tolist()[1:] == [b"", b""]
  # The search itself gave the blank row text, which the output drops.
  assert vocab.decode(result["ids"][1:2]).numpy()[0]
  assert result["outputs"].numpy()[0] == vocab.decode(
      result["ids"][:1]).numpy()[0]
