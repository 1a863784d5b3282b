"""The in-graph search over id sequences: output lengths, PAD kept out of
every output, concurrent searches over blocks of rows, the search's weights made
once, and int8 as settled (`machine.settle`).

    settled = machine.settle(hp)  # once, at the boundary
    weights = fixed_search_weights(model, settled.int8,
                                   settled.weights_first)
    result = search_with_hparams(model, inputs, settled,
                                 search_weights=weights)
    # the same as (unless settled.int8_per_call: an export's)
    result = decode(model, inputs, DecodePlan.from_settled(settled),
                    search_weights=weights)
"""
import dataclasses

import tensorflow as tf

from t2tlite.decode import constraints, strategy
from t2tlite.decode.prefix import ForcedPrefix
from t2tlite.decode.step_rules import StepRules
from t2tlite.ids import EOS_ID, PAD_ID
from t2tlite.layers import int8 as int8_layer


def decode_lengths(model, inputs, extra_length):
  """Output length limits: input length (EOS included) + extra_length.

  A model with learned positions has no encoding past config.max_length, so
  its outputs are capped there.

  Args:
    inputs: int32 [batch, src_len], 0-padded.
  Returns:
    (buffer length: int32 scalar, src_len + extra_length capped, static when
    src_len is; per-sentence limits: int32 [batch]).
  """
  lengths = tf.reduce_sum(tf.cast(inputs != PAD_ID, tf.int32), axis=1)
  buffer, limits = tf.shape(inputs)[1] + extra_length, lengths + extra_length
  if model.config.position_encoding == "learned":
    buffer = tf.minimum(buffer, model.config.max_length)
    limits = tf.minimum(limits, model.config.max_length)
  return buffer, limits


def balanced_blocks(inputs, parts):
  """The rows of `parts` blocks that take about as long to search: the
  rows by length, longest first, dealt out in turn, so that every block
  holds long and short rows alike and side-by-side searches end together
  (a block searches until its last row stops). Blocks differ in size by at
  most one (empty ones when there are fewer rows than parts).

  Args:
    inputs: int32 [batch, src_len], 0-padded.
  Returns:
    a list of `parts` int32 [batch_i] row indices.
  """
  lengths = tf.reduce_sum(tf.cast(inputs != PAD_ID, tf.int32), axis=1)
  order = tf.argsort(lengths, direction="DESCENDING", stable=True)
  return [order[i::parts] for i in range(parts)]


def int8_or_float(model, inputs, plan, search_weights=None, constraint=None,
                  target_prefix=None):
  """`decode` of an int8 plan whose int8 is decided at each call where the
  graph runs (an export's `SettledDecode`, int8_per_call): the graph holds
  both searches and runs the int8 one where its kernel computes
  (`int8.kernel_works`, a few small ops), else the one without int8 (its
  weights made in the call from the model's variables), so that an
  exported int8 search never fails for want of the kernel, whatever
  machine serves it. (Otherwise int8 is decided once, by `machine.settle`
  for the machine at hand.)

  Args:
    model, inputs, constraint, target_prefix: as `decode` takes them.
    plan: a `strategy.DecodePlan` with int8.
    search_weights: None, or `fixed_search_weights(model, True,
      settled.weights_first)`.
  """
  plain = dataclasses.replace(plan, int8=False, int8_weights_first=False)
  return tf.cond(int8_layer.kernel_works(),
                 lambda: decode(model, inputs, plan, constraint,
                                search_weights, target_prefix),
                 lambda: decode(model, inputs, plain, constraint, None,
                                target_prefix))


def fixed_search_weights(model, int8=False, weights_first=False,
                         held=True, laid_out_kernels=True):
  """The weights a search reads (`model.search_weights`), made once, now,
  for all later searches of a model whose weights no longer change (a
  decoder or an export of a checkpoint): `decode` then skips making
  them at every call, which costs 40-200 ms a batch for transformer_base
  (the output projection's layout, the int8 quantization; BUILD_NOTES.md,
  "Search weights made once").

  Runs eagerly, even when called while tracing. Weights already in the
  compute dtype stay the model's tf.Variables (no second copy); the others
  (casts, layouts, quantized kernels) are tensors made here.

  int8 kernels made here never change, so they are held unless `held` is
  false: oneDNN lays each out once, at a graph's first product, and keeps
  it (`int8.held_product`: no copy of the weights at every step, no
  transposed result), on every CPU whose TensorFlow has that product
  (`int8.held_kernels_available`); weights_first then does not apply.

  Args:
    model: a Transformer (or anything with its search_weights).
    int8: the int8 search's weights (see DecodeHParams).
    weights_first: their layout where they are not held
      (`precision.int8_support`).
    held: False for a graph that may run where TensorFlow lacks the held
      product (an export: TF Serving's core ops only).
    laid_out_kernels: a float32 search's decoder kernel layout (settled:
      `SettledDecode.laid_out_kernels`).
  Returns:
    a `SearchWeights` (an `EnsembleWeights` for an `Ensemble`), as
    `decode`'s search_weights.
  """
  held = held and int8 and int8_layer.held_kernels_available()
  with tf.init_scope():
    weights = model.search_weights(int8=int8, keep_variables=True,
                                   int8_weights_first=weights_first and
                                   not held,
                                   laid_out_kernels=laid_out_kernels)
  return weights.held() if held else weights


def decode(model, inputs, plan, constraint=None, search_weights=None,
           target_prefix=None, static_shapes=False):
  """Decodes a batch of id sequences as `plan` says (graph- and XLA-safe):
  the one entrance of every decode request (a Decoder, an export,
  t2t-serve, bench).

  This is the function to wrap in a `tf.function` for export, e.g. with
  input_signature=[tf.TensorSpec([None, None], tf.int32)].

  Args:
    model: a Transformer (or anything with its search_weights,
      prepare_decoding and config: an `ensemble.Ensemble`).
    inputs: int32 [batch, src_len], each row ending with EOS, 0-padded. A
      model with learned positions reads only the first max_length.
    plan: a `strategy.DecodePlan` (`DecodePlan.from_settled`). Its
      concurrent_searches are independent searches over blocks of the
      batch's rows (`balanced_blocks`), sharing one copy of the
      weights; the outputs are those of one search over the whole batch
      (see DecodeHParams for int8).
    constraint: None, or a `constraints.DecodeConstraint` that every output
      obeys.
    search_weights: None (made in the graph, at every call, as the plan
      says: int8 and its layout), or `fixed_search_weights(model,
      plan.int8, plan.int8_weights_first)`, made once: int8 ones for an
      int8 search (else ValueError).
    target_prefix: None, or int32 [batch, prefix_len], each output's first
      tokens, 0-padded (`prefix.ForcedPrefix`); a prefix longer than its
      output's limit fails (InvalidArgumentError naming it).
    static_shapes: fixed-size decoding caches, as XLA needs
      (`tf.function(jit_compile=True)`); otherwise they grow one position
      per step, which moves less memory in graph mode.
  Returns:
    {"outputs": int32 [batch, out_len] or, with a beam axis (Beam
    return_beams, Greedy beam_axis, Sample num_samples > 1; the settled
    hp.multiple_outputs), [batch, beam, out_len] (ending with EOS,
    0-padded), "scores": float32 [batch] or [batch, beam]}; out_len is
    src_len + extra_length (see `decode_lengths`). Greedy and sampled
    scores are log-probabilities, beam scores are length-penalised.
  """
  if model.config.position_encoding == "learned":
    inputs = inputs[:, :model.config.max_length]  # the table's end
  if search_weights is None:
    search_weights = model.search_weights(
        int8=plan.int8, int8_weights_first=plan.int8_weights_first,
        laid_out_kernels=plan.laid_out_kernels)
  elif search_weights.int8 != plan.int8:
    raise ValueError(f"decode(int8={plan.int8}) was given the search "
                     f"weights of an int8={not plan.int8} search: make them "
                     f"with fixed_search_weights(model, int8={plan.int8})")
  limits = plan.limits
  if target_prefix is not None:
    # Checked for the whole batch before its rows are dealt out to
    # concurrent searches: a block's failed check cancels the others'
    # calls, and their cancellation, not the check's message, may reach
    # the caller.
    target_prefix = _checked_prefix(
        target_prefix, decode_lengths(model, inputs, limits.extra_length)[1])

  def search_block(rows, prefix_ids=None):
    """(outputs, scores) of the strategy's search over a block of rows."""
    kept = tf.shape(rows)[0]
    # (XLA takes no padding of a dynamic size; a block of a known number
    # of rows has them.)
    may_be_empty = not static_shapes and not rows.shape[0]
    if may_be_empty:
      rows, prefix_ids, stand_in = _stand_in_if_empty(rows, prefix_ids)
    length, row_limits = decode_lengths(model, rows, limits.extra_length)
    if may_be_empty:
      row_limits *= 1 - stand_in  # it stops before its first step
    step, cache = model.prepare_decoding(
        rows, length if static_shapes else None,
        search_weights=search_weights)
    if constraint is not None:
      step, cache = constraints.constrain(step, cache, constraint, rows,
                                          row_limits)
    forced = None if prefix_ids is None else ForcedPrefix(prefix_ids)
    rules = StepRules.of(limits, PAD_ID, forced)
    outputs, scores = plan.strategy.search(
        step, cache, length, rules, row_limits, rows,
        drop_finished=not static_shapes)
    return outputs[:kept], scores[:kept]

  parts = [inputs] if target_prefix is None else [inputs, target_prefix]
  if plan.concurrent_searches == 1:
    outputs, scores = search_block(*parts)
  else:
    # Traced once, called once a block: independent calls, which the
    # runtime runs side by side. Not inlined, each call's search is
    # optimized on its own, the calls' side by side, not the copies one
    # after the other in the inlined graph: a Decoder's first batch 0.87x
    # on two cores, later ones as fast. int8's stay inlined: as calls their
    # steps ran about 3% slower (docs/performance_log.md, 2026-11-28).
    # (Without AutoGraph: the searches' loops are tf.while_loops already.)
    block_search = tf.function(
        search_block, autograph=False,
        experimental_attributes=None if plan.int8 else {"_noinline": True},
        input_signature=[tf.TensorSpec([None] + part.shape[1:], part.dtype)
                         for part in parts])
    blocks = balanced_blocks(inputs, plan.concurrent_searches)
    outputs, scores = (tf.concat(results, axis=0) for results in zip(
        *[block_search(*[tf.gather(part, rows) for part in parts])
          for rows in blocks]))
    # Back to the batch's order.
    back = tf.argsort(tf.concat(blocks, axis=0))
    outputs, scores = tf.gather(outputs, back), tf.gather(scores, back)
  return {"outputs": outputs, "scores": scores}


def _stand_in_if_empty(rows, prefix_ids):
  """(rows, prefix_ids, stand_in): an empty block (an empty batch, or
  fewer rows than concurrent searches) as one row of EOS without a prefix,
  stand_in 1 (else 0 and the block as it is). The search's products then
  never multiply zero rows, which oneDNN's int8 kernel cannot; the caller
  stops the stand-in at once and cuts its outputs off.

  Args:
    rows: int32 [batch, src_len]; prefix_ids: None or int32 [batch,
      prefix_len].
  """
  def none(size):
    return tf.cast(tf.equal(size, 0), tf.int32)

  # The row is as long as the block's others (the blocks' outputs are
  # joined), or 1 where they have no length either.
  stand_in = none(tf.shape(rows)[0])
  rows = tf.pad(rows, [[0, stand_in], [0, stand_in * none(tf.shape(rows)[1])]],
                constant_values=EOS_ID)
  if prefix_ids is not None:
    prefix_ids = tf.pad(prefix_ids, [[0, stand_in], [0, 0]])
  return rows, prefix_ids, stand_in


def _checked_prefix(prefix_ids, row_limits):
  """prefix_ids int32 [rows, prefix_len], after an assertion that no
  prefix is longer than its row's limit."""
  lengths = tf.reduce_sum(tf.cast(prefix_ids != PAD_ID, tf.int32), axis=1)
  check = tf.debugging.assert_less_equal(
      lengths, row_limits,
      message="target prefix longer than its output may hold (the input's "
      "length + extra_length): shorten it or raise extra_length")
  with tf.control_dependencies([check]):
    return tf.identity(prefix_ids)


def search_with_hparams(model, inputs, settled, constraint=None,
                        search_weights=None, target_prefix=None):
  """`decode` as settled decode hparams say (`strategy.DecodePlan`, built
  from them here), int8 as settled (`int8_or_float`).

  Args:
    model: a Transformer (or anything `decode` decodes).
    inputs: int32 [batch, src_len], each row ending with EOS, 0-padded.
    settled: a `machine.SettledDecode` (concurrent searches a number, int8
      decided); hp.batch_size is not used.
    constraint: None, or a `constraints.DecodeConstraint` that every output
      obeys.
    search_weights: None, or `fixed_search_weights(model, settled.int8,
      settled.weights_first)`.
    target_prefix: None, or int32 [batch, prefix_len] (see `decode`).
  Returns:
    {"outputs": int32 [batch, out_len] (or [batch, beam, out_len] with
    hp.multiple_outputs: beams or samples), "scores": float32 [batch] (or
    [batch, beam])}, as `decode`.
  Raises:
    TypeError: hparams not settled.
  """
  plan = strategy.DecodePlan.from_settled(settled)
  if plan.int8 and settled.int8_per_call:
    return int8_or_float(model, inputs, plan, search_weights, constraint,
                         target_prefix)
  return decode(model, inputs, plan, constraint, search_weights,
                target_prefix)
