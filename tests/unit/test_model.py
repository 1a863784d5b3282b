"""The Transformer model: parameter counts, masks, cached decoding, configs."""
import dataclasses
import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2tlite
from t2tlite.layers import shapes
from t2tlite.layers.attention import MultiHeadAttention, causal_bias
from t2tlite.layers.embedding import PositionEncoding, SharedEmbedding
from t2tlite.layers.feed_forward import FeedForward
from t2tlite.layers.linear import decoding_kernels, position_wise
from t2tlite.layers.search_weights import (FloatKernel, LaidOutKernel,
                                           SearchWeights)
from t2tlite.layers.transformer_layers import (DecoderLayer, EncoderLayer,
                                               Residual)
from t2tlite.models.config import TransformerConfig
from t2tlite.models.transformer import Transformer

# The count is vocab * d_model plus weights that do not depend on the
# vocabulary (analytic_param_count): a small vocabulary checks the same sum
# as the paper's 37000 (section 5.1), with less to build; odd, so that no
# rounding of the table's size goes unseen.
VOCAB = 37


def analytic_param_count(hp, vocab):
  """Counts the weights of section 3 by hand, independently of the code."""
  d, h = hp.d_model, hp.num_heads
  attention = d * h * hp.d_k * 2 + d * h * hp.d_v + h * hp.d_v * d
  ffn = d * hp.d_ff + hp.d_ff + hp.d_ff * d + d
  norm = 2 * d
  encoder_layer = attention + ffn + 2 * norm
  decoder_layer = 2 * attention + ffn + 3 * norm
  total = vocab * d + hp.num_layers * (encoder_layer + decoder_layer)
  if hp.position_encoding == "learned":
    total += 2 * hp.max_length * d
  if hp.norm_position == "pre":
    total += 2 * norm
  return total


# One set of Table 3 for each way its rows vary the model (one head as wide
# as the model; d_k other than d_v; fewer layers; a narrower model; learned
# positions); test_hparams.py checks every row's values.
PAPER_SETS = ["transformer_base", "transformer_big"] + [
    f"transformer_base_{row}" for row in ("a1", "b1", "c1", "c4", "e")]


@pytest.mark.parametrize("name", PAPER_SETS)
def test_parameter_count_matches_analytic_count(name):
  hp = t2tlite.create_hparams(name)
  model = t2tlite.build_model(hp, VOCAB)
  assert model.count_params() == analytic_param_count(hp, VOCAB)


def test_parameter_count_pre_norm():
  hp = t2tlite.create_hparams("transformer_tiny", "norm_position=pre")
  model = t2tlite.build_model(hp, 100)
  assert model.count_params() == analytic_param_count(hp, 100)


def tiny(overrides="", vocab=40, seed=1):
  keras.utils.set_random_seed(seed)
  hp = t2tlite.create_hparams("transformer_tiny", overrides)
  return t2tlite.build_model(hp, vocab)


# transformer_tiny is pre-norm: the paper's post-norm is named.
VARIANTS = ["norm_position=post", "norm_position=pre",
            "position_encoding=learned", "d_k=16,d_v=24"]


@pytest.fixture(scope="module")
def variant_model():
  """variant_model(overrides): `tiny(overrides)`, built once in this module
  (seeded as tiny seeds it); the tests only call it and prepare_decoding,
  which write no variables."""
  return functools.cache(tiny)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_decoder_is_causal(variant_model, overrides):
  model = variant_model(overrides)
  inputs = tf.constant([[5, 6, 7, 8, 1]])
  targets = np.array([[9, 10, 11, 12, 13, 1]])
  before = model({"inputs": inputs, "targets": targets}).numpy()
  for t in range(targets.shape[1]):
    changed = targets.copy()
    changed[0, t] = 30
    after = model({"inputs": inputs, "targets": changed}).numpy()
    # Logits at position p depend on targets < p (the input is shifted right).
    np.testing.assert_allclose(after[:, :t + 1], before[:, :t + 1], atol=1e-5)
    if t + 1 < targets.shape[1]:
      assert np.abs(after[:, t + 1] - before[:, t + 1]).max() > 1e-4


@pytest.mark.parametrize("overrides", VARIANTS)
def test_padding_leaves_real_positions_unchanged(variant_model, overrides):
  model = variant_model(overrides)
  inputs = tf.constant([[5, 6, 7, 1]])
  targets = tf.constant([[9, 10, 1]])
  plain = model({"inputs": inputs, "targets": targets}).numpy()
  padded = model({"inputs": tf.pad(inputs, [[0, 0], [0, 4]]),
                  "targets": tf.pad(targets, [[0, 0], [0, 3]])}).numpy()
  np.testing.assert_allclose(padded[:, :3], plain, atol=1e-5)
  # Batched with a longer example, the short one still gets the same logits.
  batch = model({
      "inputs": tf.constant([[5, 6, 7, 1, 0, 0], [4, 4, 4, 4, 4, 1]]),
      "targets": tf.constant([[9, 10, 1, 0], [3, 3, 3, 1]])}).numpy()
  np.testing.assert_allclose(batch[:1, :3], plain, atol=1e-5)


@pytest.mark.parametrize("growing", [False, True])
@pytest.mark.parametrize("overrides", VARIANTS)
def test_cached_decoding_reproduces_full_forward(variant_model, overrides,
                                                 growing):
  model = variant_model(overrides)
  inputs = tf.constant([[5, 6, 7, 8, 1, 0], [4, 3, 1, 0, 0, 0]])
  targets = tf.constant([[9, 10, 11, 12, 1], [13, 14, 15, 1, 0]])
  full = model({"inputs": inputs, "targets": targets}).numpy()
  decode_step, cache = model.prepare_decoding(inputs,
                                              None if growing else 8)
  previous = tf.zeros([2], tf.int32)  # the start symbol
  for step in range(targets.shape[1]):
    logits, cache = decode_step(previous, tf.constant(step), cache)
    np.testing.assert_allclose(logits.numpy(), full[:, step], atol=1e-4)
    previous = targets[:, step]


def test_beams_share_their_batch_elements_encoder_memory():
  """Rows batch * beams read one copy of each element's encoder keys and
  values: the same logits as giving every row its own copy."""
  model = tiny("d_k=16,d_v=24")
  inputs = tf.constant([[5, 6, 7, 8, 1], [4, 3, 1, 0, 0]])
  beams = 3
  shared = model.decoding_memory(inputs)
  own = model.decoding_memory(tf.repeat(inputs, beams, axis=0))
  assert shared["keys"][0].shape[0] == 2 and own["keys"][0].shape[0] == 6
  cache_shared = model.init_cache(6, 4)
  cache_own = model.init_cache(6, 4)
  ids = tf.zeros([6], tf.int32)
  for step in range(3):
    logits, cache_shared = model.decode_step(ids, step, cache_shared, shared)
    expected, cache_own = model.decode_step(ids, step, cache_own, own)
    np.testing.assert_allclose(logits.numpy(), expected.numpy(), atol=1e-5)
    ids = tf.constant([9, 10, 11, 12, 13, 14]) + step  # a token per row


def test_cached_decoding_in_a_compiled_loop():
  """decode_step keeps static shapes, so a tf.while_loop can carry the cache
  (with XLA too): this is what beam search and the exporter rely on. One
  layer: every layer's cache is carried alike, and XLA compiles it faster."""
  model = tiny("num_layers=1")
  inputs = tf.constant([[5, 6, 7, 8, 1]])

  def greedy(inputs):
    decode_step, cache = model.prepare_decoding(inputs, 6)
    ids = tf.zeros([6], tf.int32)

    def body(step, previous, ids, cache):
      logits, cache = decode_step(previous, step, cache)
      token = tf.argmax(logits, -1, output_type=tf.int32)
      ids = tf.tensor_scatter_nd_update(ids, [[step]], token)
      return step + 1, token, ids, cache

    _, _, ids, _ = tf.while_loop(lambda s, *_: s < 6, body,
                                 (0, tf.zeros([1], tf.int32), ids, cache))
    return ids

  eager = greedy(inputs).numpy()
  graph = tf.function(greedy, autograph=False)(inputs).numpy()
  xla = tf.function(greedy, jit_compile=True, autograph=False)(inputs).numpy()
  np.testing.assert_array_equal(eager, graph)
  np.testing.assert_array_equal(eager, xla)


def test_pre_norm_encoder_output_is_layer_normalised(variant_model):
  """Pre-norm sublayers leave the residual stream unnormalised: the encoder
  ends with its own layer norm (gain 1 and bias 0 as initialised)."""
  model = variant_model("norm_position=pre")
  memory = model.encode(tf.constant([[5, 6, 7, 8, 1]])).numpy()
  np.testing.assert_allclose(memory.mean(-1), 0.0, atol=1e-4)
  np.testing.assert_allclose(memory.var(-1), 1.0, atol=1e-2)


def test_pre_norm_decoder_output_is_layer_normalised_before_projection():
  """The decoder's final layer norm feeds the tied projection: its bias b
  adds b E^T to the logits of every position."""
  model = tiny("norm_position=pre,num_layers=1")
  features = {"inputs": tf.constant([[5, 6, 7, 8, 1]]),
              "targets": tf.constant([[9, 10, 11, 1]])}
  before = model(features).numpy()
  beta = np.random.RandomState(2).standard_normal(model.config.d_model)
  model.decoder_norm.beta.assign(beta.astype(np.float32))
  shift = beta @ model.embedding.embeddings.numpy().T
  np.testing.assert_allclose(model(features).numpy() - before,
                             np.broadcast_to(shift, before.shape),
                             rtol=1e-4, atol=1e-4)


def test_feed_forward_is_relu_of_first_map_plus_bias_then_second_map():
  """Eq. (2), with biases other than their zero initialisation."""
  layer = FeedForward(d_ff=16)
  x = tf.random.stateless_normal([2, 3, 8], seed=[3, 4])
  layer(x)
  rng = np.random.RandomState(0)
  for bias in (layer.b1, layer.b2):
    bias.assign(rng.standard_normal(bias.shape).astype(np.float32))
  w1, b1, w2, b2 = (v.numpy() for v in (layer.w1, layer.b1, layer.w2,
                                         layer.b2))
  expected = np.maximum(0.0, x.numpy() @ w1 + b1) @ w2 + b2
  np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-5,
                             atol=1e-5)


def test_position_wise_map_with_several_unknown_leading_axes():
  kernel = tf.random.stateless_normal([8, 5], seed=[5, 6])
  apply = tf.function(lambda x: position_wise(x, kernel), autograph=False,
                      input_signature=[tf.TensorSpec([None, None, 8])])
  assert apply.get_concrete_function().output_shapes.as_list() == [
      None, None, 5]
  x = tf.random.stateless_normal([2, 3, 8], seed=[7, 8])
  np.testing.assert_allclose(apply(x).numpy(), x.numpy() @ kernel.numpy(),
                             rtol=1e-5, atol=1e-5)


def test_only_float32_kernels_are_laid_out_for_decoding():
  """Each 2-D float32 kernel as [1, d_out, d_in]; a bfloat16 search keeps
  the kernels as stored."""
  layer = FeedForward(d_ff=16)
  layer(tf.zeros([1, 1, 8]))
  values = {w.path: tf.convert_to_tensor(w) for w in layer.weights}
  kernels = decoding_kernels(values, [layer])
  matrices = [w for w in layer.weights if len(w.shape) == 2]
  assert sorted(kernels) == sorted(w.path for w in matrices)
  for w in matrices:
    assert isinstance(kernels[w.path], LaidOutKernel)
    np.testing.assert_array_equal(kernels[w.path].kernel.numpy(),
                                  w.numpy().T[np.newaxis])
  halves = {path: tf.cast(value, tf.bfloat16)
            for path, value in values.items()}
  assert decoding_kernels(halves, [layer]) == {}


def test_reshape_of_an_empty_tensor_keeps_its_unknown_axis():
  # Merging the trailing axes of [rows, 4, 0]: a -1 beside the 0 would be
  # read from the nonzero sizes (rows * 4), not as rows.
  apply = tf.function(
      lambda x: shapes.reshape(x, [shapes.dim(x, 0), 0]),
      autograph=False, input_signature=[tf.TensorSpec([None, 4, 0])])
  assert apply(tf.zeros([3, 4, 0])).shape == (3, 0)


def test_attention_weights_shapes_and_normalisation():
  model = tiny()
  maps = model.attention_weights({"inputs": tf.constant([[5, 6, 7, 1, 0]]),
                                  "targets": tf.constant([[8, 9, 1]])})
  assert [m.shape for m in maps["encoder"]] == [(1, 4, 5, 5)] * 2
  assert [m.shape for m in maps["decoder_self"]] == [(1, 4, 3, 3)] * 2
  assert [m.shape for m in maps["encdec"]] == [(1, 4, 3, 5)] * 2
  np.testing.assert_allclose(maps["encdec"][0].numpy().sum(-1), 1.0, atol=1e-5)
  assert np.all(maps["encdec"][0].numpy()[..., 4] == 0.0)  # padding
  assert np.all(np.triu(maps["decoder_self"][1].numpy()[0, 0], 1) == 0.0)


def layer_norm(x, gamma, beta, epsilon):
  mean = x.mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon) * gamma + beta


def randomize_norms(layer, seed):
  """Gains and biases of every layer norm under `layer` other than the 1
  and 0 they start with (and alike in every norm), as training leaves them."""
  rng = np.random.RandomState(seed)
  for variable in layer.weights:
    if "layer_norm" in variable.path:
      variable.assign(rng.uniform(0.5, 1.5, variable.shape).astype(np.float32)
                      if variable.path.endswith("gamma") else
                      rng.standard_normal(variable.shape).astype(np.float32))


@pytest.mark.parametrize("position", ["post", "pre"])
def test_residual_norms_as_its_position_says(position):
  """post: LayerNorm(x + sublayer(x)); pre: x + sublayer(LayerNorm(x))."""
  residual = Residual(position, dropout=0.5, layer_norm_epsilon=1e-3)
  x = tf.random.stateless_normal([2, 3, 8], seed=[1, 2]) * 3.0 + 1.0
  out = tf.random.stateless_normal([2, 3, 8], seed=[3, 4])
  residual.build(x.shape)
  randomize_norms(residual, 5)
  gamma, beta = residual.norm.gamma.numpy(), residual.norm.beta.numpy()
  normed = layer_norm(x.numpy(), gamma, beta, 1e-3)
  total = x.numpy() + out.numpy()
  expected_input = normed if position == "pre" else x.numpy()
  expected_output = (total if position == "pre" else
                     layer_norm(total, gamma, beta, 1e-3))
  np.testing.assert_allclose(residual.sublayer_input(x).numpy(),
                             expected_input, rtol=1e-5, atol=1e-5)
  # Inference: no dropout.
  np.testing.assert_allclose(residual(x, out).numpy(), expected_output,
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("position", ["post", "pre"])
def test_cached_decoder_layer_with_trained_norms_matches_teacher_forcing(
    position):
  """Each sublayer's own norm, in a search's step as in training: norms
  left at their initial values would all compute alike."""
  layer = DecoderLayer(num_heads=2, d_k=4, d_v=6, d_ff=16,
                       norm_position=position)
  x = tf.random.stateless_normal([2, 4, 8], seed=[5, 6])
  memory = tf.random.stateless_normal([2, 5, 8], seed=[7, 8])
  layer(x, memory)
  randomize_norms(layer, 9)
  full, _ = layer(x, memory, self_bias=causal_bias(4))
  keys_values = layer.memory_keys_values(memory)
  cache = layer.init_cache(2)
  for t in range(4):
    y, _, cache = layer.call_cached(x[:, t:t + 1], keys_values, cache)
    np.testing.assert_allclose(y.numpy()[:, 0], full.numpy()[:, t],
                               rtol=1e-4, atol=1e-4)


def test_attention_follows_equation_1_and_drops_nothing_at_inference():
  """Concat(softmax(q k^T / sqrt(d_k) + bias) v) W^O, with the keys'
  padding hidden; its attention dropout acts in training only."""
  layer = MultiHeadAttention(num_heads=2, d_k=3, d_v=5, attention_dropout=0.5)
  query = tf.random.stateless_normal([2, 3, 8], seed=[1, 1])
  memory = tf.random.stateless_normal([2, 4, 8], seed=[2, 2])
  bias = tf.constant([[0.0, 0.0, 0.0, -1e9], [0.0] * 4])[:, None, None]
  outputs, weights = layer(query, memory, bias=bias)
  w_q, w_k, w_v, w_o = (w.numpy() for w in layer.input_maps() + (layer.w_o,))

  def heads(x, depth):  # [batch, len, 2 * depth] -> [batch, 2, len, depth]
    return x.reshape(x.shape[0], x.shape[1], 2, depth).transpose(0, 2, 1, 3)

  q = heads(query.numpy() @ w_q, 3)
  k, v = heads(memory.numpy() @ w_k, 3), heads(memory.numpy() @ w_v, 5)
  scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(3.0) + bias.numpy()
  expected_weights = np.exp(scores - scores.max(-1, keepdims=True))
  expected_weights /= expected_weights.sum(-1, keepdims=True)
  concat = (expected_weights @ v).transpose(0, 2, 1, 3).reshape(2, 3, 10)
  np.testing.assert_allclose(weights.numpy(), expected_weights, atol=1e-5)
  np.testing.assert_allclose(outputs.numpy(), concat @ w_o, rtol=1e-4,
                             atol=1e-5)
  trained, _ = layer(query, memory, bias=bias, training=True)
  assert np.abs(trained.numpy() - outputs.numpy()).max() > 1e-3


def test_sinusoid_encoding_matches_section_3_5():
  layer = PositionEncoding("sinusoid")
  layer.build((None, None, 6))
  table = layer.encodings(0, 50).numpy()
  pos, i = 37, 2
  np.testing.assert_allclose(table[pos, 2 * i],
                             np.sin(pos / 10000**(2 * i / 6)), atol=1e-5)
  np.testing.assert_allclose(table[pos, 2 * i + 1],
                             np.cos(pos / 10000**(2 * i / 6)), atol=1e-5)
  np.testing.assert_allclose(layer.encodings(7, 3).numpy(), table[7:10],
                             atol=1e-5)


def test_embedding_is_shared_and_scaled():
  model = tiny(vocab=40)
  d_model = model.config.d_model
  table = model.embedding.embeddings.numpy()
  assert table.shape == (40, d_model)
  np.testing.assert_allclose(model.embedding(tf.constant([[3]])).numpy()[0, 0],
                             table[3] * np.sqrt(d_model), rtol=1e-6)
  x = tf.random.normal([1, 2, d_model])
  np.testing.assert_allclose(model.embedding.logits(x).numpy(),
                             x.numpy() @ table.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_search_output_kernel_gives_the_logits_of_the_table(policy):
  # A search's step multiplies by the output kernel laid out once
  # (SharedEmbedding.output_kernels: [d_model, vocab] in float32,
  # [1, vocab, d_model] in bfloat16): the logits of the table, up to the
  # rounding of another summation order (kernels differ by CPU).
  embedding = SharedEmbedding(vocab_size=37, d_model=16, dtype=policy)
  embedding.build()
  x = tf.cast(tf.random.stateless_normal([6, 1, 16], seed=[1, 2]),
              embedding.compute_dtype)
  table = tf.cast(embedding.embeddings, embedding.compute_dtype)
  kernels = embedding.output_kernels({embedding.embeddings.path: table})
  expected_shape = [16, 37] if policy == "float32" else [1, 37, 16]
  variant = FloatKernel if policy == "float32" else LaidOutKernel
  [kernel] = kernels.values()
  assert isinstance(kernel, variant) and kernel.kernel.shape == expected_shape
  weights = SearchWeights({embedding.embeddings.path: table}, kernels={},
                          output_kernels=kernels)
  laid_out = embedding.logits(x, search_weights=weights)
  assert laid_out.shape == [6, 1, 37] and laid_out.dtype == tf.float32
  tolerance = 1e-5 if policy == "float32" else 2**-7
  np.testing.assert_allclose(laid_out.numpy(), embedding.logits(x).numpy(),
                             rtol=tolerance, atol=tolerance)


def test_embedding_table_has_standard_deviation_d_model_to_minus_half():
  """So that lookups scaled by sqrt(d_model) have unit variance."""
  keras.utils.set_random_seed(4)
  embedding = SharedEmbedding(vocab_size=500, d_model=64)
  embedding.build()
  np.testing.assert_allclose(embedding.embeddings.numpy().std(), 64**-0.5,
                             rtol=0.03)
  lookups = embedding(tf.range(500)[tf.newaxis]).numpy()
  np.testing.assert_allclose(lookups.var(), 1.0, rtol=0.06)


def test_float_search_lays_out_the_output_projection_once(tiny_model):
  """A float32 search multiplies by the table transposed, made with its
  weights rather than at every step."""
  table = tiny_model.embedding.embeddings
  kernel = tiny_model.search_weights().output_kernel(table)
  assert isinstance(kernel, FloatKernel)
  np.testing.assert_array_equal(kernel.kernel.numpy(), table.numpy().T)


_LAYER_ARGS = dict(num_heads=2, d_k=4, d_v=6, d_ff=16, dropout=0.2,
                   attention_dropout=0.1, relu_dropout=0.3,
                   norm_position="pre", layer_norm_epsilon=1e-5)


@pytest.mark.parametrize("cls, kwargs, args", [
    (MultiHeadAttention, dict(num_heads=2, d_k=3, d_v=5,
                              attention_dropout=0.1), [tf.zeros([1, 4, 8])]),
    (FeedForward, dict(d_ff=16, relu_dropout=0.2), [tf.zeros([1, 4, 8])]),
    (SharedEmbedding, dict(vocab_size=11, d_model=8),
     [tf.zeros([1, 4], tf.int32)]),
    (PositionEncoding, dict(kind="learned", max_length=9),
     [tf.zeros([1, 4, 8])]),
    (Residual, dict(norm_position="pre", dropout=0.3, layer_norm_epsilon=1e-5),
     [tf.zeros([1, 4, 8]), tf.zeros([1, 4, 8])]),
    (EncoderLayer, _LAYER_ARGS, [tf.zeros([1, 4, 8]), None]),
    (DecoderLayer, _LAYER_ARGS,
     [tf.zeros([1, 3, 8]), tf.zeros([1, 4, 8]), None, None]),
])
def test_layer_get_config_round_trip(cls, kwargs, args):
  layer = cls(**kwargs)
  layer(*args)
  config = layer.get_config()
  # Every constructor argument as given: one left out would come back as
  # its default.
  assert {name: config[name] for name in kwargs} == kwargs
  clone = cls.from_config(config)
  assert clone.get_config() == config
  clone(*args)
  assert [w.shape for w in clone.weights] == [w.shape for w in layer.weights]


def test_model_get_config_round_trip():
  model = tiny("norm_position=pre,position_encoding=learned,d_v=16")
  config = model.get_config()
  clone = Transformer.from_config(config)
  assert clone.get_config() == config
  ids = tf.constant([[3, 4, 1]])
  clone({"inputs": ids, "targets": ids})
  assert clone.count_params() == model.count_params()
  # And through Keras serialization, as a saved .keras model would go.
  again = keras.saving.deserialize_keras_object(
      keras.saving.serialize_keras_object(model))
  assert again.get_config() == config


def _variables_by_path(model):
  """{path below the model's own name: value} of its variables, in order."""
  return [(w.path.split("/", 1)[1], w.numpy()) for w in model.weights]


@pytest.mark.parametrize("overrides,target_vocab", [
    ("norm_position=post", None),
    ("norm_position=pre,position_encoding=learned,d_v=24", 13)])
def test_building_makes_the_variables_a_first_call_makes(overrides,
                                                         target_vocab):
  """build_by_calling builds without calling: the same variables in the
  same order with the same values as a first call would make, so seeded
  runs and fixed-weight outputs do not move."""
  hp = t2tlite.create_hparams("transformer_tiny", overrides)
  made = {}
  for how in ("built", "called"):
    keras.utils.set_random_seed(5)
    model = Transformer.from_hparams(hp, 40, target_vocab_size=target_vocab)
    if how == "built":
      model.build_by_calling()
    else:
      ids = tf.ones([1, 1], tf.int32)
      model({"inputs": ids, "targets": ids})
    made[how] = _variables_by_path(model)
  assert [p for p, _ in made["built"]] == [p for p, _ in made["called"]]
  for (path, built), (_, called) in zip(made["built"], made["called"]):
    np.testing.assert_array_equal(built, called, err_msg=path)


class _WithALayerOfItsOwn(Transformer):
  """A plugin's subclass whose `call` uses a layer `build` does not know."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.extra = keras.layers.Dense(self.vocab_size, name="extra")

  def call(self, features, training=False):
    return self.extra(super().call(features, training=training))


def test_a_subclasss_own_layer_is_built_by_a_call():
  model = _WithALayerOfItsOwn.from_hparams(
      t2tlite.create_hparams("transformer_tiny"), 40)
  model.build_by_calling()
  assert model.extra.built
  assert model.extra.kernel.shape == (40, 40)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision(policy):
  keras.utils.set_random_seed(3)
  hp = t2tlite.create_hparams("transformer_tiny")
  model = t2tlite.build_model(hp, 40, dtype=policy)
  assert model.embedding.embeddings.dtype == "float32"  # variables stay fp32
  inputs = tf.constant([[5, 6, 7, 1]])
  targets = tf.constant([[8, 9, 1]])
  with tf.GradientTape() as tape:
    logits = model({"inputs": inputs, "targets": targets}, training=True)
    loss = tf.reduce_mean(logits)
  assert logits.dtype == tf.float32
  grads = tape.gradient(loss, model.trainable_variables)
  assert all(g is not None for g in grads)
  full = model({"inputs": inputs, "targets": targets})
  decode_step, cache = model.prepare_decoding(inputs, 4)
  logits, _ = decode_step(tf.zeros([1], tf.int32), 0, cache)
  np.testing.assert_allclose(logits.numpy(), full[:, 0].numpy(), atol=0.1)


# Checkpoint keys (run_dir.model_variables) of a 1-layer pre-norm model with
# learned positions, as written by the code that trained the existing
# checkpoints; they must not change, or those checkpoints stop loading.
CHECKPOINT_KEYS = [
    "decoder_0/encdec_attention/w_k", "decoder_0/encdec_attention/w_o",
    "decoder_0/encdec_attention/w_q", "decoder_0/encdec_attention/w_v",
    "decoder_0/encdec_attention_residual/layer_norm/beta",
    "decoder_0/encdec_attention_residual/layer_norm/gamma",
    "decoder_0/feed_forward/b1", "decoder_0/feed_forward/b2",
    "decoder_0/feed_forward/w1", "decoder_0/feed_forward/w2",
    "decoder_0/feed_forward_residual/layer_norm/beta",
    "decoder_0/feed_forward_residual/layer_norm/gamma",
    "decoder_0/self_attention/w_k", "decoder_0/self_attention/w_o",
    "decoder_0/self_attention/w_q", "decoder_0/self_attention/w_v",
    "decoder_0/self_attention_residual/layer_norm/beta",
    "decoder_0/self_attention_residual/layer_norm/gamma",
    "decoder_norm/beta", "decoder_norm/gamma",
    "decoder_positions/position_embeddings", "embedding/embeddings",
    "encoder_0/feed_forward/b1", "encoder_0/feed_forward/b2",
    "encoder_0/feed_forward/w1", "encoder_0/feed_forward/w2",
    "encoder_0/feed_forward_residual/layer_norm/beta",
    "encoder_0/feed_forward_residual/layer_norm/gamma",
    "encoder_0/self_attention/w_k", "encoder_0/self_attention/w_o",
    "encoder_0/self_attention/w_q", "encoder_0/self_attention/w_v",
    "encoder_0/self_attention_residual/layer_norm/beta",
    "encoder_0/self_attention_residual/layer_norm/gamma",
    "encoder_norm/beta", "encoder_norm/gamma",
    "encoder_positions/position_embeddings"]


def test_checkpoint_keys_are_unchanged():
  from t2tlite import run_dir
  model = tiny("num_layers=1,norm_position=pre,position_encoding=learned",
               vocab=11)
  assert sorted(run_dir.model_variables(model)) == CHECKPOINT_KEYS


def test_config_from_hparams_and_dict_form():
  hp = t2tlite.create_hparams("transformer_tiny", "d_v=24")
  config = TransformerConfig.from_hparams(hp)
  assert (config.d_model, config.d_v) == (hp.d_model, 24)
  assert TransformerConfig.coerce(config.to_dict()) == config
  assert Transformer.from_hparams(hp, 40).config == config


def test_config_cannot_change_under_a_built_model():
  """The model reads its config when called (norm_position), after its
  layers were built from it: changing it would mismatch them."""
  config = TransformerConfig.from_hparams(
      t2tlite.create_hparams("transformer_tiny"))
  with pytest.raises(dataclasses.FrozenInstanceError):
    config.norm_position = "post"
  assert hash(config) == hash(TransformerConfig.coerce(config.to_dict()))


def test_separate_target_vocabulary():
  """vocab 40 for the encoder, 13 for the decoder input and the tied
  pre-softmax projection."""
  from t2tlite import run_dir
  from decode_helpers import decode_ids
  keras.utils.set_random_seed(1)
  hp = t2tlite.create_hparams("transformer_tiny",
                              "num_layers=1,norm_position=pre,"
                              "position_encoding=learned")
  model = t2tlite.build_model(hp, 40, target_vocab_size=13)
  d_model = model.config.d_model
  assert model.input_embedding.embeddings.shape == (40, d_model)
  assert model.embedding.embeddings.shape == (13, d_model)
  assert model.count_params() == analytic_param_count(hp, 40) + 13 * d_model
  assert sorted(run_dir.model_variables(model)) == sorted(
      CHECKPOINT_KEYS + ["input_embedding/embeddings"])

  inputs = tf.constant([[39, 38, 7, 1, 0], [4, 3, 1, 0, 0]])
  targets = tf.constant([[12, 11, 1], [5, 1, 0]])
  full = model({"inputs": inputs, "targets": targets}).numpy()
  assert full.shape == (2, 3, 13)
  decode_step, cache = model.prepare_decoding(inputs, 4)
  previous = tf.zeros([2], tf.int32)
  for step in range(3):
    logits, cache = decode_step(previous, tf.constant(step), cache)
    np.testing.assert_allclose(logits.numpy(), full[:, step], atol=1e-4)
    previous = targets[:, step]
  outputs = decode_ids(model, inputs, beam_size=3, extra_length=6)["outputs"]
  assert outputs.shape[0] == 2 and int(tf.reduce_max(outputs)) < 13

  config = model.get_config()
  assert (config["vocab_size"], config["target_vocab_size"]) == (40, 13)
  clone = Transformer.from_config(config)
  clone.build_by_calling()
  assert clone.get_config() == config
  assert [w.shape for w in clone.weights] == [w.shape for w in model.weights]
