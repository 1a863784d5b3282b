"""Ensemble decoding (t2tlite.decode.ensemble): an ensemble of one model,
or of a model with itself, searches as that model; two different models
give the mean of their log-probabilities."""
import numpy as np
import pytest
import tensorflow as tf

from t2tlite.data.vocab import EOS_ID
from decode_helpers import decode_ids
from t2tlite.decode.ensemble import Ensemble
from t2tlite.hparams_lib import HParams
from t2tlite.models import build_model

from outputs_differ import assert_outputs_differ

INPUTS = tf.constant([[5, 9, 12, 7, EOS_ID, 0, 0],
                      [3, 4, EOS_ID, 0, 0, 0, 0],
                      [8, 8, 30, 31, 32, 17, EOS_ID]])
SEARCHES = {"greedy": dict(beam_size=1), "beam": dict(beam_size=3, alpha=0.6,
                                                      return_beams=True)}


@pytest.fixture(scope="module")
def other_model():
  """Another architecture (one layer, learned positions) of vocabulary 40."""
  tf.keras.utils.set_random_seed(2)
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, d_k=8, d_v=8,
               max_length=64, position_encoding="learned")
  return build_model(hp, vocab_size=40)


def search(model, name):
  fn = tf.function(lambda x: decode_ids(model, x, extra_length=6,
                                        **SEARCHES[name]), autograph=False)
  result = fn(INPUTS)
  return result["outputs"].numpy(), result["scores"].numpy()


@pytest.mark.parametrize("name", ["greedy", "beam"])
def test_an_ensemble_of_one_model_or_of_itself_is_that_model(tiny_model,
                                                             name):
  outputs, scores = search(tiny_model, name)
  assert_outputs_differ(outputs.tolist())
  for members in ([tiny_model], [tiny_model, tiny_model]):
    ensemble_outputs, ensemble_scores = search(Ensemble(members), name)
    np.testing.assert_array_equal(ensemble_outputs, outputs)
    np.testing.assert_allclose(ensemble_scores, scores, rtol=1e-5,
                               atol=1e-5)


def test_the_ensemble_averages_log_probabilities(tiny_model, other_model):
  ensemble = Ensemble([tiny_model, other_model])
  assert ensemble.config.position_encoding == "learned"
  step, cache = ensemble.prepare_decoding(INPUTS)
  ids = tf.zeros([3], tf.int32)
  log_probs, _ = step(ids, tf.constant(0), cache)
  expected = []
  for model in (tiny_model, other_model):
    model_step, model_cache = model.prepare_decoding(INPUTS)
    logits, _ = model_step(ids, tf.constant(0), model_cache)
    expected.append(tf.nn.log_softmax(logits))
  np.testing.assert_allclose(log_probs, (expected[0] + expected[1]) / 2,
                             rtol=1e-5, atol=1e-5)
  outputs, _ = search(ensemble, "beam")
  assert outputs.shape[:2] == (3, 3)


def test_learned_positions_stop_the_ensemble_at_the_shortest_table(
    tiny_model, other_model):
  tf.keras.utils.set_random_seed(3)
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, d_k=8, d_v=8,
               max_length=16, position_encoding="learned")
  short = build_model(hp, vocab_size=40)
  for members in ([other_model, short], [short, other_model],
                  [tiny_model, short, other_model]):
    config = Ensemble(members).config
    assert (config.position_encoding, config.max_length) == ("learned", 16)
  assert Ensemble([tiny_model, other_model]).config.max_length == 64


def test_an_int8_ensemble_quantizes_every_member(tiny_model, other_model):
  ensemble = Ensemble([tiny_model, other_model])
  assert [w.int8 for w in ensemble.search_weights(int8=True).members] == [
      True, True]
  assert [w.int8 for w in ensemble.search_weights().members] == [False,
                                                                 False]
