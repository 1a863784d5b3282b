"""The in-graph search over id sequences: output lengths, PAD kept out of
every output, concurrent searches over blocks of rows, the search's weights made
once, and int8 as settled (`machine.settle`).

    weights = fixed_search_weights(model)
    result = decode_ids(model, inputs, beam_size=4, search_weights=weights)
    # or as settled decode hparams say (machine.settle):
    result = search_with_hparams(model, inputs, machine.settle(hp),
                                 search_weights=weights)
"""
import dataclasses

import tensorflow as tf

from t2tlite.decode import constraints, machine, sampling
from t2tlite.decode.beam_search import beam_search, greedy_search
from t2tlite.ids import PAD_ID
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


def row_parts(inputs, parts):
  """`inputs`' rows in `parts` consecutive blocks whose sizes differ by at
  most one (empty blocks when there are fewer rows than parts).

  Args:
    inputs: [batch, ...].
  Returns:
    a list of `parts` tensors [batch_i, ...], in order.
  """
  batch = tf.shape(inputs)[0]
  bounds = [(i * batch) // parts for i in range(parts + 1)]
  return [inputs[start:end] for start, end in zip(bounds, bounds[1:])]


def int8_or_float(settled, search_weights, search):
  """search(hp, search_weights) with the settled hparams, int8 as settled.

  Int8 is decided once: by `machine.settle` for the machine at hand, or,
  with settled.int8_per_call (an export), at each call where the graph
  runs: the graph then holds both searches and runs the int8 one where its
  kernel computes (`int8.kernel_works`, a few small ops), else the one
  without int8 (its weights made in the call from the model's variables),
  so that an exported int8 search never fails for want of the kernel,
  whatever machine serves it.

  Args:
    settled: a `machine.SettledDecode`.
    search_weights: None, or `fixed_search_weights(model, settled.int8,
      settled.weights_first)`.
    search: callable(hp, search_weights) -> {name: tensor}.
  """
  hp = settled.hp
  if not settled.int8_per_call:
    return search(hp, search_weights)
  plain = dataclasses.replace(hp, int8=False)
  return tf.cond(int8_layer.kernel_works(),
                 lambda: search(hp, search_weights),
                 lambda: search(plain, None))


def fixed_search_weights(model, int8=False, weights_first=False):
  """The weights a search reads (`model.search_weights`), made once, now,
  for all later searches of a model whose weights no longer change (a
  decoder or an export of a checkpoint): `decode_ids` then skips making
  them at every call, which costs 40-200 ms a batch for transformer_base
  (the output projection's layout, the int8 quantization; BUILD_NOTES.md,
  "Search weights made once").

  Runs eagerly, even when called while tracing. Weights already in the
  compute dtype stay the model's tf.Variables (no second copy); the others
  (casts, layouts, quantized kernels) are tensors made here.

  Args:
    model: a Transformer (or anything with its search_weights).
    int8: the int8 search's weights (see DecodeHParams).
    weights_first: their layout (`precision.int8_support`).
  Returns:
    a `SearchWeights` (an `EnsembleWeights` for an `Ensemble`), as
    `decode_ids`'s search_weights.
  """
  with tf.init_scope():
    return model.search_weights(int8=int8, keep_variables=True,
                                int8_weights_first=weights_first)


def decode_ids(model, inputs, beam_size=4, alpha=0.6, extra_length=50,
               return_beams=False, static_shapes=False, constraint=None,
               int8=False, concurrent_searches=1, search_weights=None,
               sampler=None, min_length=0, no_repeat_ngram_size=0):
  """Searches outputs for a batch of id sequences (graph- and XLA-safe).

  This is the function to wrap in a `tf.function` for export, e.g. with
  input_signature=[tf.TensorSpec([None, None], tf.int32)].

  Args:
    model: a Transformer (or anything with its search_weights,
      prepare_decoding and config).
    inputs: int32 [batch, src_len], each row ending with EOS, 0-padded. A
      model with learned positions reads only the first max_length.
    beam_size: 1 runs greedy search (alpha is then unused).
    alpha, extra_length: see DecodeHParams.
    return_beams: keep all beams (beam_size > 1 only).
    static_shapes: fixed-size decoding caches, as XLA needs
      (`tf.function(jit_compile=True)`); otherwise they grow one position
      per step, which moves less memory in graph mode.
    constraint: None, or a `constraints.DecodeConstraint` that every output
      obeys.
    int8: see DecodeHParams.
    concurrent_searches: independent searches over consecutive blocks of
      the batch's rows (`row_parts`), sharing one copy of the weights. The
      graph runs them side by side (`machine.settle` says when that
      is faster, `machine.set_search_threads` gives each its cores); the
      outputs are those of one search over the whole batch (see
      DecodeHParams for int8).
    search_weights: None (made in the graph, at every call), or
      `fixed_search_weights(model, int8)`, made once: int8 ones for an
      int8 search (else ValueError).
    sampler: None (search), or a `sampling.Sampler`: outputs are sampled
      (beam_size, alpha and return_beams unused); with num_samples > 1
      they get a sample axis, as beams do.
    min_length, no_repeat_ngram_size: see DecodeHParams (ints).
  Returns:
    {"outputs": int32 [batch, out_len] or [batch, beam, out_len] (ending with
    EOS, 0-padded), "scores": float32 [batch] or [batch, beam]}; out_len is
    src_len + extra_length (see `decode_lengths`). Greedy and sampled
    scores are log-probabilities, beam scores are length-penalised.
  """
  if model.config.position_encoding == "learned":
    inputs = inputs[:, :model.config.max_length]  # the table's end
  if search_weights is None:
    search_weights = model.search_weights(int8=int8)
  elif search_weights.int8 != int8:
    raise ValueError(f"decode_ids(int8={int8}) was given the search weights "
                     f"of an int8={not int8} search: make them with "
                     f"fixed_search_weights(model, int8={int8})")

  def prepared(rows):
    """(step function, cache, decode length, per-row limits) for `rows`."""
    length, limits = decode_lengths(model, rows, extra_length)
    step, cache = model.prepare_decoding(
        rows, length if static_shapes else None,
        search_weights=search_weights)
    if constraint is not None:
      step, cache = constraints.constrain(step, cache, constraint, rows,
                                          limits)
    return step, cache, length, limits

  def search(rows):
    if sampler is not None:
      return sample(rows)
    step, cache, length, limits = prepared(rows)
    if beam_size == 1:
      outputs, scores = greedy_search(
          step, cache, length, max_lengths=limits, excluded_id=PAD_ID,
          min_length=min_length, no_repeat_ngram_size=no_repeat_ngram_size)
      if return_beams:
        outputs, scores = outputs[:, tf.newaxis], scores[:, tf.newaxis]
    else:
      outputs, scores = beam_search(step, cache, beam_size, length,
                                    alpha=alpha, return_beams=return_beams,
                                    max_lengths=limits, excluded_id=PAD_ID,
                                    min_length=min_length,
                                    no_repeat_ngram_size=no_repeat_ngram_size)
    return outputs, scores

  def sample(inputs):
    rows, keys = sampler.expand(inputs)
    step, cache, length, limits = prepared(rows)
    outputs, scores = greedy_search(
        step, cache, length, max_lengths=limits, pick=sampler.pick_for(keys),
        excluded_id=PAD_ID, min_length=min_length,
        no_repeat_ngram_size=no_repeat_ngram_size)
    if sampler.num_samples > 1:
      n = sampler.num_samples
      outputs = tf.reshape(outputs, [-1, n, tf.shape(outputs)[-1]])
      scores = tf.reshape(scores, [-1, n])
    return outputs, scores

  if concurrent_searches == 1:
    outputs, scores = search(inputs)
  else:
    # Traced once, called once a block: independent calls, which the
    # runtime inlines and runs side by side.
    # (Without AutoGraph: the searches' loops are tf.while_loops already.)
    block_search = tf.function(
        search, autograph=False,
        input_signature=[tf.TensorSpec([None] + inputs.shape[1:],
                                       inputs.dtype)])
    outputs, scores = (tf.concat(parts, axis=0) for parts in zip(
        *[block_search(rows)
          for rows in row_parts(inputs, concurrent_searches)]))
  return {"outputs": outputs, "scores": scores}


def search_with_hparams(model, inputs, settled, constraint=None,
                        search_weights=None):
  """`decode_ids` as settled decode hparams say: searched or sampled, int8
  as settled (`int8_or_float`).

  Args:
    model: a Transformer (or anything `decode_ids` searches).
    inputs: int32 [batch, src_len], each row ending with EOS, 0-padded.
    settled: a `machine.SettledDecode` (concurrent searches a number, int8
      decided); hp.batch_size is not used.
    constraint: None, or a `constraints.DecodeConstraint` that every output
      obeys.
    search_weights: None, or `fixed_search_weights(model, settled.int8,
      settled.weights_first)`.
  Returns:
    {"outputs": int32 [batch, out_len] (or [batch, beam, out_len] with
    hp.multiple_outputs: beams or samples), "scores": float32 [batch] (or
    [batch, beam])}, as `decode_ids`.
  Raises:
    TypeError: hparams not settled.
  """
  if not isinstance(settled, machine.SettledDecode):
    raise TypeError(f"search_with_hparams takes settled decode hparams, got "
                    f"{type(settled).__name__}: settle them for this "
                    "machine first (machine.settle)")

  def search(hp, weights):
    return decode_ids(
        model, inputs, hp.beam_size, hp.alpha, hp.extra_length,
        hp.return_beams, constraint=constraint, int8=hp.int8,
        concurrent_searches=hp.concurrent_searches, search_weights=weights,
        sampler=sampling.Sampler.from_hparams(hp), min_length=hp.min_length,
        no_repeat_ngram_size=hp.no_repeat_ngram_size)

  return int8_or_float(settled, search_weights, search)
