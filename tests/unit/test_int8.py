"""int8 decoding: the quantized product against float32, and a search whose
decoder multiplies in int8 (decode hparam int8)."""
import numpy as np
import pytest
import tensorflow as tf

from t2tlite import hardware
from decode_helpers import decode_ids
from t2tlite.decode.settings import DecodeHParams
from t2tlite.layers import int8
from t2tlite.layers.search_weights import (Int8HeldKernel, Int8Kernel,
                                           Int8WeightsFirstKernel)

from int8_kernel import needs_int8

INPUTS = tf.constant([[5, 6, 7, 1, 0, 0], [8, 9, 10, 11, 12, 1],
                      [13, 1, 0, 0, 0, 0]], tf.int32)


def relative_error(approximate, exact):
  return float(np.max(np.abs(approximate - exact)) / np.max(np.abs(exact)))


@needs_int8
@pytest.mark.parametrize("weights_first", [False, True])
def test_quantized_product_is_close_to_float32(weights_first):
  rng = np.random.default_rng(0)
  x = rng.standard_normal([24, 96]).astype(np.float32)
  x[3] = 0.0  # an all-zero row stays (to rounding) zero
  x[5] *= 1000.0  # rows are scaled one by one
  kernel = rng.standard_normal([96, 40]).astype(np.float32) * 0.1
  kernel[:, 7] *= 50.0  # and columns too
  quantized = int8.quantize_kernel(tf.constant(kernel), weights_first)
  if weights_first:  # stored [d_out, d_in], shifted by 128 into 1..255
    stored = quantized.weights_first.numpy()
    assert stored.shape == (40, 96)
    assert stored.min() == 1 and stored.max() == 255
  else:
    assert quantized.kernel.dtype == tf.int8
    assert np.abs(quantized.kernel.numpy()).max() == 127
  product = int8.matmul(tf.constant(x), quantized).numpy()
  exact = x @ kernel
  np.testing.assert_allclose(product[3], 0.0, atol=1e-12)
  for rows in (slice(None), slice(5, 6), slice(6, None)):
    assert relative_error(product[rows], exact[rows]) < 0.03
  # Not the float32 product: the int8 kernel really ran.
  assert relative_error(product, exact) > 1e-5


@needs_int8
def test_both_layouts_compute_the_same_integer_sums():
  rng = np.random.default_rng(1)
  x = tf.constant(rng.standard_normal([33, 64]).astype(np.float32))
  kernel = tf.constant(rng.standard_normal([64, 300]).astype(np.float32))
  first = int8.matmul(x, int8.quantize_kernel(kernel, weights_first=True))
  second = int8.matmul(x, int8.quantize_kernel(kernel, weights_first=False))
  # The same quantized values and integer sums; only the float32 rounding
  # differs (each form cancels its shift, a term of a few hundred, by a
  # float32 bias: about 1e-4 of absolute error).
  np.testing.assert_allclose(first, second, rtol=0, atol=2e-4)
  exact = x.numpy() @ kernel.numpy()
  assert relative_error(first.numpy(), exact) < 0.03


@needs_int8
def test_weights_first_feed_forward_is_its_two_products_chained():
  rng = np.random.default_rng(4)
  x = tf.constant(rng.standard_normal([5, 16]).astype(np.float32))
  w1, w2 = (rng.standard_normal(shape).astype(np.float32)
            for shape in ([16, 32], [32, 16]))
  b1, b2 = (tf.constant(rng.standard_normal([d]).astype(np.float32))
            for d in (32, 16))
  q1, q2 = (int8.quantize_kernel(tf.constant(w), weights_first=True)
            for w in (w1, w2))
  out = int8.weights_first_feed_forward(x, q1, b1, q2, b2).numpy()
  hidden = tf.nn.relu(int8.matmul(x, q1) + b1)
  chained = (int8.matmul(hidden, q2) + b2).numpy()
  np.testing.assert_allclose(out, chained, rtol=1e-6, atol=1e-6)
  exact = np.maximum(x.numpy() @ w1 + b1.numpy(), 0.0) @ w2 + b2.numpy()
  assert relative_error(out, exact) < 0.05


def _graph_product(held):
  """A tf.function of x @ `held`, which its graph holds."""
  return tf.function(lambda x: int8.matmul(x, held), autograph=False)


@needs_int8
def test_a_held_kernel_gives_the_activations_first_product():
  rng = np.random.default_rng(2)
  x = tf.constant(rng.standard_normal([33, 64]).astype(np.float32))
  kernel = tf.constant(rng.standard_normal([64, 300]).astype(np.float32))
  quantized = int8.quantize_kernel(kernel)
  held = int8.held(quantized)
  assert isinstance(held, Int8HeldKernel)
  product = _graph_product(held)
  ops = {op.type for op in product.get_concrete_function(x).graph
         .get_operations()}
  assert "_QuantizedMatMul" in ops
  assert "QuantizedMatMulWithBiasAndDequantize" not in ops
  # The same integer sums; the column scales are applied by the kernel,
  # the shift removed by its bias, so the float32 rounding differs.
  expected = int8.matmul(x, quantized).numpy()
  np.testing.assert_allclose(product(x), expected, rtol=0, atol=2e-4)
  exact = x.numpy() @ kernel.numpy()
  assert 1e-5 < relative_error(product(x).numpy(), exact) < 0.03
  # Eagerly there is no graph to hold it: the activations-first product.
  np.testing.assert_array_equal(int8.matmul(x, held), expected)


@needs_int8
def test_each_graph_holds_the_kernel_it_was_traced_with():
  # oneDNN keeps the copy it made at an op's first product: graphs of the
  # same shapes, each traced with its own held kernel, must each keep
  # multiplying by theirs, in any order of calls.
  rng = np.random.default_rng(3)
  x = tf.constant(rng.standard_normal([5, 32]).astype(np.float32))
  kernels = [int8.quantize_kernel(tf.constant(
      rng.standard_normal([32, 16]).astype(np.float32))) for _ in range(2)]
  products = [_graph_product(int8.held(kernel)) for kernel in kernels]
  for _ in range(2):
    for product, kernel in zip(products, kernels):
      np.testing.assert_allclose(product(x), int8.matmul(x, kernel),
                                 rtol=0, atol=2e-4)


@needs_int8
def test_a_held_kernel_is_refused_as_a_functions_argument():
  # Each call could pass another kernel, and the op would keep the first.
  held = int8.held(int8.quantize_kernel(tf.random.normal([16, 8])))
  x = tf.random.normal([4, 16])
  as_argument = tf.function(int8.matmul, autograph=False)
  with pytest.raises(ValueError, match="argument of this tf.function"):
    as_argument(x, held)

  # Nor through a function traced inside one that takes it.
  def outer(x, held):
    return tf.function(lambda: int8.matmul(x, held), autograph=False)()

  with pytest.raises(ValueError, match="argument of this tf.function"):
    tf.function(outer, autograph=False)(x, held)
  # Captured, it is multiplied by.
  assert _graph_product(held)(x).shape == (4, 8)


@needs_int8
def test_a_held_kernel_keeps_the_input_dtype_and_takes_no_rows():
  held = int8.held(int8.quantize_kernel(tf.random.normal([16, 8])))
  x = tf.cast(tf.random.normal([4, 16]), tf.bfloat16)
  assert _graph_product(held)(x).dtype == tf.bfloat16
  assert _graph_product(held)(tf.zeros([0, 16])).shape == (0, 8)


@needs_int8
def test_no_rows_give_no_rows_in_the_activations_first_layout():
  quantized = int8.quantize_kernel(tf.random.normal([16, 8]))
  product = tf.function(int8.matmul,
                        autograph=False)(tf.zeros([0, 16]), quantized)
  assert product.shape == (0, 8)


@needs_int8
def test_the_weights_first_layout_refuses_no_rows():
  # oneDNN makes no product of zero columns: a search gives an empty block
  # a stand-in row instead (test_concurrent_searches' empty blocks), so
  # its products need no guard of their own.
  quantized = int8.quantize_kernel(tf.random.normal([16, 8]), True)
  with pytest.raises(tf.errors.OpError, match="primitive descriptor"):
    tf.function(int8.matmul, autograph=False)(tf.zeros([0, 16]), quantized)


def test_the_caller_picks_the_layout(monkeypatch):
  # The layer reads no CPU description: the layout is an argument
  # (precision.int8_support picks it for a machine).
  monkeypatch.setattr(hardware, "cpuinfo",
                      lambda: {"flags": "avx2 avx512f avx512_vnni"})
  assert isinstance(int8.quantize_kernel(tf.ones([4, 3])), Int8Kernel)
  assert isinstance(int8.quantize_kernel(tf.ones([4, 3]), weights_first=True),
                    Int8WeightsFirstKernel)
  source = open(int8.__file__).read()
  code = source.split('"""')[-1]  # the code, not the docstrings
  assert "precision" not in code and "hardware" not in code
  assert "cpuinfo" not in source


@needs_int8
def test_quantized_product_keeps_the_input_dtype():
  kernel = int8.quantize_kernel(tf.random.normal([16, 8]))
  x = tf.cast(tf.random.normal([4, 16]), tf.bfloat16)
  assert int8.matmul(x, kernel).dtype == tf.bfloat16


def _first_step(model, int8_search):
  decode_step, cache = model.prepare_decoding(
      INPUTS, None, search_weights=model.search_weights(int8=int8_search))
  step = tf.function(lambda ids, cache: decode_step(ids, 0, cache),
                     autograph=False)
  ids = tf.zeros([INPUTS.shape[0]], tf.int32)
  return step, step(ids, cache)[0].numpy(), (ids, cache)


def _int8_products(graph):
  """The int8 products of `graph`, after asserting that every other
  product in it is an attention product (rank 4), not a float map."""
  quantized = [op for op in graph.get_operations()
               if op.type == "QuantizedMatMulWithBiasAndDequantize"]
  float_matmuls = [op for op in graph.get_operations() if "MatMul" in op.type
                   and op not in quantized]
  assert all(op.inputs[1].shape.rank == 4 for op in float_matmuls)
  return quantized


@needs_int8
def test_int8_step_multiplies_every_decoder_map_in_int8(tiny_model):
  step, int8_logits, args = _first_step(tiny_model, True)
  quantized = _int8_products(step.get_concrete_function(*args).graph)
  # Per decoder layer q, k and v in one product, output (self), q, output
  # (encdec), 2 FFN; then the output projection.
  assert len(quantized) == 6 * len(tiny_model.decoder_layers) + 1
  _, float_logits, _ = _first_step(tiny_model, False)
  assert relative_error(int8_logits, float_logits) < 0.05
  assert relative_error(int8_logits, float_logits) > 1e-6


def _memory(model, int8_search):
  weights = model.search_weights(int8=int8_search)
  memory = tf.function(lambda x: model.decoding_memory(x, weights),
                       autograph=False)
  return memory, memory(INPUTS)["keys"][0].numpy()


@needs_int8
def test_int8_search_encodes_in_int8(tiny_model):
  memory, int8_keys = _memory(tiny_model, True)
  quantized = _int8_products(memory.get_concrete_function(INPUTS).graph)
  # Per encoder layer q, k and v in one product, output, 2 FFN; then each
  # decoder layer's keys and values of the memory.
  assert len(quantized) == (4 * len(tiny_model.encoder_layers) +
                            2 * len(tiny_model.decoder_layers))
  _, float_keys = _memory(tiny_model, False)
  assert relative_error(int8_keys, float_keys) < 0.05
  assert relative_error(int8_keys, float_keys) > 1e-6


@needs_int8
def test_int8_search_through_decode_hparams(tiny_model):
  hp = DecodeHParams.parse("int8=true")
  assert hp.int8 and not DecodeHParams().int8
  result = decode_ids(tiny_model, INPUTS, beam_size=4, extra_length=6,
                      int8=hp.int8)
  plain = decode_ids(tiny_model, INPUTS, beam_size=4, extra_length=6)
  ids, scores = result["outputs"].numpy(), result["scores"].numpy()
  assert ids.shape == plain["outputs"].shape
  assert np.count_nonzero(ids) > INPUTS.shape[0]  # not all empty outputs
  # An untrained model's near-ties may flip, but the scores stay close.
  np.testing.assert_allclose(scores, plain["scores"].numpy(), rtol=0.05)


def test_the_kernel_check_agrees_with_tensorflows_onednn_path():
  # Runs everywhere: where the kernel is missing it says so, no error.
  from t2tlite import onednn
  assert bool(int8.kernel_works()) == onednn.enabled()
  assert bool(tf.function(int8.kernel_works,
                          autograph=False)()) == onednn.enabled()
