"""A search's weights made once (`search.fixed_search_weights`): the
outputs of weights made at every call, the model's variables not copied, and
nothing of the weights made again in the traced search."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from decode_helpers import decode_ids
from t2tlite.decode import machine
from t2tlite.decode.search import fixed_search_weights
from t2tlite.decode.settings import DecodeHParams
from t2tlite.hparams_lib import HParams
from t2tlite.models import build_model

from int8_kernel import needs_int8
from outputs_differ import assert_outputs_differ
from search_graphs import weight_transposes

INPUTS = tf.constant([[5, 6, 7, 1, 0, 0], [8, 9, 10, 11, 12, 1],
                      [13, 1, 0, 0, 0, 0]], tf.int32)


def searcher(model, int8, searches, search_weights=None):
  return tf.function(lambda x: decode_ids(
      model, x, beam_size=2, extra_length=5, return_beams=True, int8=int8,
      concurrent_searches=searches, search_weights=search_weights),
                     autograph=False)


def _layout(int8):
  """The int8 layout settled for this machine (weights first with VNNI)."""
  return machine.settle(DecodeHParams(int8=int8)).weights_first


@pytest.fixture(scope="module")
def tiny_searcher(tiny_model):
  """tiny_searcher(int8, searches, fixed=False): `searcher` of tiny_model,
  with weights made once (fixed, as a Decoder makes them: in the layout
  settled for the machine) or at every call; one per arguments in this
  module, so that the tests that run a search and those that read its
  graph share its trace."""
  made = {}

  def get(int8, searches, fixed=False):
    if (int8, searches, fixed) not in made:
      weights = (fixed_search_weights(tiny_model, int8, _layout(int8))
                 if fixed else None)
      made[int8, searches, fixed] = searcher(tiny_model, int8, searches,
                                             weights)
    return made[int8, searches, fixed]
  return get


@pytest.mark.parametrize("int8,searches", [
    (False, 1), pytest.param(True, 2, marks=needs_int8)])
def test_fixed_weights_give_the_outputs_of_weights_made_per_call(
    tiny_searcher, int8, searches):
  expected = tiny_searcher(int8, searches)(INPUTS)
  assert_outputs_differ(expected["outputs"].numpy().tolist())
  fixed = tiny_searcher(int8, searches, fixed=True)
  for _ in range(2):  # and again: the weights are read, not used up
    result = fixed(INPUTS)
    np.testing.assert_array_equal(result["outputs"], expected["outputs"])
    np.testing.assert_allclose(result["scores"], expected["scores"],
                               atol=1e-6)


def test_weights_in_the_compute_dtype_stay_the_variables(tiny_model):
  fixed = fixed_search_weights(tiny_model)
  for variable in tiny_model.weights:
    assert fixed.read(variable) is variable.value
  derived = list(fixed.kernels.values())
  assert derived and not isinstance(derived[0].kernel, tf.Variable)


def test_bfloat16_casts_are_made_once():
  keras.utils.set_random_seed(1)
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, d_k=8, d_v=8,
               max_length=16)
  model = build_model(hp, vocab_size=30, dtype="mixed_bfloat16")
  fixed = fixed_search_weights(model)
  assert {fixed.read(v).dtype for v in model.weights} == {tf.bfloat16}
  assert not any(isinstance(fixed.read(v), tf.Variable)
                 for v in model.weights)


@needs_int8
def test_int8_search_in_bfloat16_takes_its_scales_as_they_come():
  # Keras casts the search's weights, int8 scales included, to bfloat16 as
  # they enter each layer's call (made per call or once); the product
  # takes the scales in float32. One search: each of concurrent ones calls
  # the layers alike, and int8 kernels held in concurrent searches are
  # run and read by the tests of tiny_searcher(True, 2, fixed=True).
  keras.utils.set_random_seed(1)
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, d_k=8, d_v=8,
               max_length=16)
  model = build_model(hp, vocab_size=30, dtype="mixed_bfloat16")
  expected = searcher(model, True, 1)(INPUTS)
  result = searcher(model, True, 1, fixed_search_weights(model, True))(INPUTS)
  np.testing.assert_array_equal(result["outputs"], expected["outputs"])


def graph_ops(graph):
  """Op types of a traced graph and of every function it calls."""
  ops = {op.type for op in graph.get_operations()}
  for function in graph.as_graph_def().library.function:
    ops |= {node.op for node in function.node_def}
  return ops


def test_the_traced_search_does_not_make_the_weights(tiny_searcher):
  def graph(int8, searches, fixed):
    fn = tiny_searcher(int8, searches, fixed)
    return fn.get_concrete_function(INPUTS).graph

  # float32 (one search): the decoding layouts are transposes of 2-D
  # weights, made in the graph itself.
  assert weight_transposes(graph(False, 1, fixed=False))
  assert not weight_transposes(graph(False, 1, fixed=True))
  # int8 (two searches, each a function of the graph's library): the
  # kernels are rounded to int8 (activations are truncated).
  assert "Round" in graph_ops(graph(True, 2, fixed=False))
  assert "Round" not in graph_ops(graph(True, 2, fixed=True))


@needs_int8
def test_int8_weights_made_once_are_held(tiny_searcher):
  """Fixed int8 kernels never change, so their products are the held
  ones (oneDNN keeps its layout of each); weights made in the graph at
  every call are not held."""
  def ops(fixed):
    graph = tiny_searcher(True, 2, fixed).get_concrete_function(
        INPUTS).graph
    return graph_ops(graph)

  assert "_QuantizedMatMul" in ops(fixed=True)
  assert "QuantizedMatMulWithBiasAndDequantize" not in ops(fixed=True)
  assert "_QuantizedMatMul" not in ops(fixed=False)


@needs_int8
def test_weights_made_per_call_are_in_the_settled_layout(tiny_model):
  """The plan carries the int8 layout settled for the machine: weights
  made in the graph use it, as a Decoder's fixed ones do (weights first,
  uint8, with VNNI)."""
  graph = searcher(tiny_model, True, 1).get_concrete_function(INPUTS).graph
  uint8 = any(out.dtype == tf.uint8 for op in graph.get_operations()
              for out in op.outputs)
  assert uint8 == _layout(True)


def test_the_weights_say_whether_they_are_int8(tiny_model):
  assert not tiny_model.search_weights().int8
  assert tiny_model.search_weights(int8=True).int8
  with pytest.raises(ValueError, match="int8=True search"):
    decode_ids(tiny_model, INPUTS, beam_size=2, extra_length=5,
               search_weights=tiny_model.search_weights(int8=True))
  with pytest.raises(ValueError, match="int8=False search"):
    decode_ids(tiny_model, INPUTS, beam_size=2, extra_length=5, int8=True,
               search_weights=tiny_model.search_weights())
