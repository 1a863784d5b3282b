"""Decoding text with a trained Transformer: settings, the in-graph search
function an exporter wraps, and batched decoding of a list of lines.

    model, info, _ = run_dir.load_trained_model(output_dir)
    vocab = Vocabulary.from_file(info.vocab_file)
    target_vocab = Vocabulary.from_file(info.target_vocab_file)
    decoder = Decoder(model, vocab, DecodeHParams.parse("beam_size=4"),
                      target_vocab)
    outputs, scores = decoder.decode_lines(lines)
"""
import dataclasses
import os

from absl import logging
import tensorflow as tf

from t2tlite import hparams_lib
from t2tlite import precision
from t2tlite.decode import constraints, sampling
from t2tlite.decode.beam_search import (IMPOSSIBLE_LOG_PROB, beam_search,
                                        greedy_search)
from t2tlite.ids import EOS_ID, PAD_ID
from t2tlite.layers import int8 as int8_layer
from t2tlite.layers.search_weights import SearchWeights


@dataclasses.dataclass(frozen=True)
class DecodeHParams:
  """Decoding settings (paper section 6.1 defaults).

  beam_size: hypotheses kept; 1 means greedy search (as in tensor2tensor).
  alpha: GNMT length-penalty exponent ((5 + length) / 6) ** alpha.
  extra_length: outputs stop at (input length + extra_length) tokens.
  batch_size: sentences decoded together.
  return_beams: also return every beam with its score (n-best).
  constrained: apply the problem's decoding constraint, if it has one
    (`Problem.decode_constraint`; parsing: well-formed trees).
  int8: multiply the decoder's maps and the output projection in int8
    (`t2tlite.layers.int8`): outputs change a little; faster where
    float32 matmuls are slow (AVX2; BUILD_NOTES.md, "int8 decoding").
    Not with XLA (the int8 kernel has no XLA form).
  concurrent_searches: searches that decode one batch side by side, each
    over a part of its sentences (`decode_ids`); 0 (auto): 2 on a CPU with
    two or more cores, else 1 (`searches_for`). float32 and bfloat16
    outputs are those of one search (int8 ones can differ a little on CPUs
    without VNNI, where its kernel depends on the row count).
  sampling_temperature: 0 searches (greedy or beam, as beam_size says);
    > 0 samples each output token from the model's distribution with its
    logits divided by this (`t2tlite.decode.sampling`; beam_size is then
    unused).
  top_k: sample among the k most probable tokens only; 0: all.
  top_p: sample among the smallest set of most probable tokens whose
    probability reaches top_p (nucleus sampling); 1: all. In (0, 1].
  sampling_seed: outputs are a function of the seed and the input
    sentence, whatever else shares its batch.
  num_samples: outputs sampled per input (each line then holds them all,
    as with return_beams).
  """
  beam_size: int = 4
  alpha: float = 0.6
  extra_length: int = 50
  batch_size: int = 32
  return_beams: bool = False
  constrained: bool = True
  int8: bool = False
  concurrent_searches: int = 0
  sampling_temperature: float = 0.0
  top_k: int = 0
  top_p: float = 1.0
  sampling_seed: int = 0
  num_samples: int = 1

  def __post_init__(self):
    hparams_lib.check_field_types(self, "decode hparam")
    for name in ("beam_size", "batch_size"):
      if getattr(self, name) < 1:
        raise ValueError(f"decode hparam {name} must be >= 1, got "
                         f"{getattr(self, name)}")
    for name in ("alpha", "extra_length", "concurrent_searches"):
      if getattr(self, name) < 0:
        raise ValueError(f"decode hparam {name} must be >= 0, got "
                         f"{getattr(self, name)}")
    self._check_sampling()

  def _check_sampling(self):
    if self.sampling_temperature < 0:
      raise ValueError("decode hparam sampling_temperature must be > 0 to "
                       "sample (0: search), got "
                       f"{self.sampling_temperature}")
    if self.top_k < 0:
      raise ValueError(f"decode hparam top_k must be >= 0, got {self.top_k}")
    if not 0 < self.top_p <= 1:
      raise ValueError(f"decode hparam top_p must be in (0, 1], got "
                       f"{self.top_p}")
    if self.num_samples < 1:
      raise ValueError(f"decode hparam num_samples must be >= 1, got "
                       f"{self.num_samples}")
    asked = [name for name, unset in (("top_k", 0), ("top_p", 1.0),
                                      ("num_samples", 1))
             if getattr(self, name) != unset]
    if asked and not self.sampling_temperature:
      raise ValueError(f"decode hparam {asked[0]}={getattr(self, asked[0])} "
                       "samples: it needs sampling_temperature > 0 (got 0, "
                       "which searches)")
    if self.sampling_temperature and self.return_beams:
      raise ValueError("decode hparam return_beams is for beam search; "
                       "with sampling_temperature > 0 ask for num_samples")

  @property
  def sampling(self):
    """Outputs are sampled (sampling_temperature > 0), not searched."""
    return self.sampling_temperature > 0

  @property
  def multiple_outputs(self):
    """Each input gets a list of outputs (n-best beams or samples)."""
    return self.return_beams or self.num_samples > 1

  @property
  def outputs_per_input(self):
    """Outputs in each input's list when multiple_outputs."""
    return self.num_samples if self.sampling else self.beam_size

  @classmethod
  def parse(cls, text):
    """From `"beam_size=4,alpha=0.6"`; unknown names and bad values raise
    ValueError naming them."""
    types = {f.name: f.type for f in dataclasses.fields(cls)}
    return cls(**hparams_lib.parse_typed_overrides(text, types,
                                                   "decode hparam"))


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


def _without_padding(decode_step):
  """decode_step whose logits never choose PAD: it is no output token (the
  loss ignores it) and would read as the start symbol at the next step."""

  def step(ids, i, cache):
    logits, cache = decode_step(ids, i, cache)
    pad = tf.one_hot(PAD_ID, tf.shape(logits)[-1], dtype=logits.dtype)
    return logits + IMPOSSIBLE_LOG_PROB * pad, cache

  return step


def cpu_cores():
  """The CPU cores this process may run on."""
  return len(os.sched_getaffinity(0))


def searches_for(hp):
  """How many concurrent searches decode a batch: hp.concurrent_searches,
  or when it is 0 (auto) 2 on a CPU with two or more cores and 1 otherwise.

  On a CPU much of a step is work too small to share between cores (the
  attention products, the search's top-k and reorderings, the smaller
  matmuls): two searches over half a batch each, each on its own core
  (`set_search_threads`), keep both busy (BUILD_NOTES.md, "Concurrent
  searches"). A GPU gets 1: there one search over the whole batch uses the
  device best.
  """
  if hp.concurrent_searches:
    return hp.concurrent_searches
  if tf.config.list_physical_devices("GPU"):
    return 1
  return 2 if cpu_cores() >= 2 else 1


def threads_per_search(searches, cores=None):
  """TensorFlow intra-op threads that give each of `searches` concurrent
  searches its share of the CPU's `cores` (default: this process's), at
  least one."""
  return max(1, (cores or cpu_cores()) // searches)


def set_search_threads(searches):
  """For programs that decode on a CPU: gives each of `searches` concurrent
  searches its own cores by setting TensorFlow's intra-op threads to
  `threads_per_search(searches)` (with two searches on two cores, one
  thread an op: the searches then run side by side without contending for
  the same threads; BUILD_NOTES.md, "Concurrent searches").

  A process-wide setting: call it before TensorFlow runs its first op.
  It does nothing for one search, nor when TF_NUM_INTRAOP_THREADS is set
  (the user's choice), and logs a warning if TensorFlow already started.

  Returns:
    the intra-op threads set, or None if it left them alone.
  """
  if searches <= 1 or os.environ.get("TF_NUM_INTRAOP_THREADS"):
    return None
  threads = threads_per_search(searches)
  try:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
  except RuntimeError as error:  # TensorFlow's context already exists
    logging.warning("%d concurrent searches keep TensorFlow's thread "
                    "settings (%s): they are faster with %d intra-op "
                    "thread(s), set before TensorFlow starts.", searches,
                    error, threads)
    return None
  logging.info("Decoding as %d concurrent searches, %d intra-op thread(s) "
               "an op.", searches, threads)
  return threads


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


_int8_reasons_logged = set()


def int8_here(hp, device=None):
  """Decode hparams that run on this machine, and the int8 layout.

  Where the int8 kernel cannot compute (`precision.int8_support`: oneDNN
  off, no AVX2, a GPU), int8 is turned off, with one log line naming the
  reason (once per reason and process), and the search multiplies in the
  compute precision instead.

  Args:
    hp: DecodeHParams.
    device: a precision.Device; default this machine.
  Returns:
    (hp, or a copy with int8=False; the weights_first layout for
    `fixed_search_weights`).
  """
  if not hp.int8:
    return hp, False
  with tf.init_scope():  # describing the machine may run ops: not in a trace
    support = precision.int8_support(device or precision.describe_device())
  if support.available:
    return hp, support.weights_first
  if support.reason not in _int8_reasons_logged:
    _int8_reasons_logged.add(support.reason)
    logging.warning("int8=true is not available here, so decoding runs "
                    "without int8: %s.", support.reason)
  return dataclasses.replace(hp, int8=False), False


def int8_or_float(hp, search_weights, search):
  """search(hp, search_weights), with int8 chosen in the graph at each call.

  With hp.int8 the graph holds both searches and runs the int8 one where
  its kernel computes (`int8.kernel_works`, a few small ops), else the one
  without int8 (its weights made in the call from the model's variables):
  a traced or exported int8 search never fails for want of the kernel,
  whatever machine runs it.

  Args:
    hp: DecodeHParams.
    search_weights: None, or `fixed_search_weights(model, hp.int8)`.
    search: callable(hp, search_weights) -> {name: tensor}.
  """
  if not hp.int8:
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
    a `SearchWeights` (a list of them for an `Ensemble`), as
    `decode_ids`'s search_weights.
  """
  with tf.init_scope():
    return model.search_weights(int8=int8, keep_variables=True,
                                int8_weights_first=weights_first)


def weights_are_int8(search_weights):
  """Whether `search_weights` (a model's `SearchWeights`, or an ensemble's
  list of them) are an int8 search's."""
  if isinstance(search_weights, SearchWeights):
    return search_weights.int8
  return all(weights.int8 for weights in search_weights)


def decode_ids(model, inputs, beam_size=4, alpha=0.6, extra_length=50,
               return_beams=False, static_shapes=False, constraint=None,
               int8=False, concurrent_searches=1, search_weights=None,
               sampler=None):
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
      graph runs them side by side (`searches_for` says when that is
      faster, `set_search_threads` gives each its cores); the outputs are
      those of one search over the whole batch (see DecodeHParams for
      int8).
    search_weights: None (made in the graph, at every call), or
      `fixed_search_weights(model, int8)`, made once: int8 ones for an
      int8 search (else ValueError).
    sampler: None (search), or a `sampling.Sampler`: outputs are sampled
      (beam_size, alpha and return_beams unused); with num_samples > 1
      they get a sample axis, as beams do.
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
  elif weights_are_int8(search_weights) != int8:
    raise ValueError(f"decode_ids(int8={int8}) was given the search weights "
                     f"of an int8={not int8} search: make them with "
                     f"fixed_search_weights(model, int8={int8})")

  def prepared(rows):
    """(step function, cache, decode length, per-row limits) for `rows`."""
    length, limits = decode_lengths(model, rows, extra_length)
    decode_step, cache = model.prepare_decoding(
        rows, length if static_shapes else None,
        search_weights=search_weights)
    step = _without_padding(decode_step)
    if constraint is not None:
      step, cache = constraints.constrain(step, cache, constraint, rows,
                                          limits)
    return step, cache, length, limits

  def search(rows):
    if sampler is not None:
      return sample(rows)
    step, cache, length, limits = prepared(rows)
    if beam_size == 1:
      outputs, scores = greedy_search(step, cache, length, max_lengths=limits)
      if return_beams:
        outputs, scores = outputs[:, tf.newaxis], scores[:, tf.newaxis]
    else:
      outputs, scores = beam_search(step, cache, beam_size, length,
                                    alpha=alpha, return_beams=return_beams,
                                    max_lengths=limits)
    return outputs, scores

  def sample(inputs):
    rows, keys = sampler.expand(inputs)
    step, cache, length, limits = prepared(rows)
    outputs, scores = greedy_search(step, cache, length, max_lengths=limits,
                                    pick=sampler.pick_for(keys))
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


def encode_inputs(vocab, strings):
  """tf.string [batch] -> int32 [batch, src_len]: ids + EOS, 0-padded."""
  ids = vocab.encode(strings)
  eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))
  return tf.concat([ids, eos], axis=1).to_tensor()


def decode_strings(model, vocab, strings, hp, target_vocab=None,
                   constraint=None, search_weights=None):
  """Text in, text out, all in graph (tensorflow-text tokenizer).

  Args:
    vocab: the inputs' Vocabulary (encodes `strings`).
    strings: tf.string [batch]; empty (or blank) strings give empty outputs.
    hp: DecodeHParams (batch_size is not used here).
    target_vocab: the targets' Vocabulary (decodes the outputs); None: vocab.
    constraint: None, or a `constraints.DecodeConstraint` (`decode_ids`).
    search_weights: None, or `fixed_search_weights(model, hp.int8)`.
  Returns:
    {"outputs": tf.string [batch] (or [batch, beam] with
    hp.multiple_outputs: beams or samples),
    "scores": float32 [batch] (or [batch, beam])}.
  """
  inputs = encode_inputs(vocab, strings)
  result = int8_or_float(hp, search_weights, lambda hp, weights: decode_ids(
      model, inputs, hp.beam_size, hp.alpha, hp.extra_length,
      hp.return_beams, constraint=constraint, int8=hp.int8,
      concurrent_searches=searches_for(hp), search_weights=weights,
      sampler=sampling.Sampler.from_hparams(hp)))
  ids, scores = result["outputs"], result["scores"]
  target_vocab = target_vocab or vocab
  if hp.multiple_outputs:
    beams = tf.shape(ids)[1]
    flat = target_vocab.decode(tf.reshape(ids, [-1, tf.shape(ids)[2]]))
    text = tf.reshape(flat, [-1, beams])
    blank = tf.equal(tf.strings.strip(strings), "")[:, tf.newaxis]
  else:
    text = target_vocab.decode(ids)
    blank = tf.equal(tf.strings.strip(strings), "")
  return {"outputs": tf.where(blank, tf.constant(""), text),
          "scores": scores}


class Decoder:
  """A model and its vocabularies with a traced text-to-text search.

  The tf.function takes tf.string [None], so batches of any size and length
  reuse one graph, and the search's weights are made once, here
  (`fixed_search_weights`): a Decoder decodes with the weights the model
  had when it was made. (Not XLA-compiled: the tensorflow-text tokenizer ops have
  no XLA kernels; `decode_ids` alone compiles.)

  Args:
    model: a trained Transformer.
    vocab: its (input) `t2tlite.data.vocab.Vocabulary`.
    hp: DecodeHParams.
    target_vocab: its target Vocabulary; None: vocab (shared).
    constraint: None, or the `constraints.DecodeConstraint` every output
      obeys (see `t2tlite.problem_decoding.decode_constraint`).
  """

  def __init__(self, model, vocab, hp, target_vocab=None, constraint=None):
    # int8 only where its kernel computes (else one log line says why).
    hp, weights_first = int8_here(hp)
    self.model, self.vocab, self.hp = model, vocab, hp
    self.target_vocab = target_vocab or vocab
    self.constraint = constraint
    weights = fixed_search_weights(model, hp.int8, weights_first)
    self._decode = tf.function(
        lambda strings: decode_strings(model, vocab, strings, hp,
                                       self.target_vocab, constraint,
                                       weights),
        input_signature=[tf.TensorSpec([None], tf.string)])

  def decode_batch(self, strings):
    """list of str -> (outputs, scores): a str and a float per input, or with
    return_beams (num_samples > 1) a list of each per input (best first;
    samples in order)."""
    result = self._decode(tf.constant(strings, tf.string))
    outputs = result["outputs"].numpy().tolist()
    if self.hp.multiple_outputs:
      outputs = [[b.decode("utf-8") for b in beams] for beams in outputs]
    else:
      outputs = [b.decode("utf-8") for b in outputs]
    return outputs, result["scores"].numpy().tolist()

  def decode_lines(self, lines, progress=True):
    """Decodes lines in batches of similar length, returned in input order.

    Args:
      lines: list of str (one sentence each, without line breaks).
      progress: log a line after each batch.
    Returns:
      (outputs, scores) lists aligned with `lines`; an empty (or blank) line
      gives "" and score 0.0 (lists of them with return_beams) undecoded.
    """
    hp = self.hp
    beams = hp.outputs_per_input if hp.multiple_outputs else None
    outputs = [[""] * beams if beams else ""] * len(lines)
    scores = [[0.0] * beams if beams else 0.0] * len(lines)
    todo = [i for i, line in enumerate(lines) if line.strip()]
    if not todo:
      return outputs, scores
    lengths = self.vocab.encode(tf.constant([lines[i] for i in todo]))
    lengths = lengths.row_lengths().numpy()
    # Longest first: similar lengths share a batch, so padding stays small
    # and an out-of-memory error, if any, comes at once.
    order = [todo[j] for j in sorted(range(len(todo)),
                                     key=lambda j: (-lengths[j], j))]
    for start in range(0, len(order), hp.batch_size):
      batch = order[start:start + hp.batch_size]
      texts, batch_scores = self.decode_batch([lines[i] for i in batch])
      for i, text, score in zip(batch, texts, batch_scores):
        outputs[i], scores[i] = text, score
      if progress:
        logging.info("Decoded %d of %d sentences.",
                     min(start + hp.batch_size, len(order)), len(order))
    return outputs, scores
