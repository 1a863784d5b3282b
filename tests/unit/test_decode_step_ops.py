"""What one decode step traces: reshapes to constant shapes where the
static shape allows (`layers.shapes`), and one int8 product for a
self-attention's queries, keys and values."""
import tensorflow as tf

from t2tlite.layers import shapes

from int8_kernel import needs_int8

INPUTS = tf.constant([[5, 6, 7, 1, 0, 0], [8, 9, 10, 11, 12, 1]], tf.int32)


def _step_graph(model, int8_search=False):
  """The graph of one growing-cache step of `model` (a FuncGraph)."""
  decode_step, cache = model.prepare_decoding(
      INPUTS, None, search_weights=model.search_weights(int8=int8_search))
  step = tf.function(lambda ids, cache: decode_step(ids, 0, cache),
                     autograph=False)
  ids = tf.zeros([INPUTS.shape[0]], tf.int32)
  return step.get_concrete_function(ids, cache).graph


def _op_types(graph):
  return [op.type for op in graph.get_operations()]


def test_a_reshape_with_one_unknown_axis_has_a_constant_target():
  graph = tf.Graph()
  with graph.as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None, 1, 8])
    y = shapes.reshape(x, [shapes.dim(x, 0), 2, 4])
    z = shapes.reshape(x, [shapes.dim(x, 0), shapes.Size(x, 1), 8])
  assert y.shape.as_list() == [None, 2, 4]
  assert z.shape.as_list()[2] == 8
  # Only z's target, with two axes unknown, reads the shape.
  assert _op_types(graph).count("Shape") == 2


def test_a_float32_step_reads_few_shapes(tiny_model):
  types = _op_types(_step_graph(tiny_model))
  layers = len(tiny_model.decoder_layers)
  # Per layer: the cache's groups for the self-attention and the memory's
  # for the encoder-decoder attention; then the search's own few. Each
  # map's reshapes and each attention's scale read none.
  assert types.count("Shape") <= 2 * layers + 8, types.count("Shape")


@needs_int8
def test_an_int8_step_quantizes_each_attention_input_once(tiny_model):
  types = _op_types(_step_graph(tiny_model, int8_search=True))
  layers = len(tiny_model.decoder_layers)
  # Per layer: queries-keys-values, the self-attention's output, the
  # encoder-decoder queries and output, 2 feed-forward maps; then the
  # output projection.
  assert types.count("QuantizedMatMulWithBiasAndDequantize") == (
      6 * layers + 1)
