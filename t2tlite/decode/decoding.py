"""Decoding text with a trained Transformer: text in and out of the
in-graph search (`t2tlite.decode.search`), and batched decoding of a list
of lines.

    model, info, _ = run_dir.load_trained_model(output_dir)
    vocab = Vocabulary.from_file(info.vocab_file)
    target_vocab = Vocabulary.from_file(info.target_vocab_file)
    # Settled once for this machine (t2tlite.decode.machine, .settings):
    settled = machine.settle(DecodeHParams.parse("beam_size=4"))
    decoder = Decoder(model, vocab, settled, target_vocab)
    outputs, scores = decoder.decode_lines(lines)
"""
import dataclasses

from absl import logging
import numpy as np
import tensorflow as tf

from t2tlite import graph_options, xla_cache
from t2tlite.decode import machine, search, strategy, trace_cache
from t2tlite.decode import prefix as prefix_lib
from t2tlite.ids import EOS_ID, PAD_ID


def encode_inputs(vocab, strings):
  """tf.string [batch] -> int32 [batch, src_len]: ids + EOS, 0-padded."""
  ids = vocab.encode(strings)
  eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))
  return tf.concat([ids, eos], axis=1).to_tensor()


def decode_strings(model, vocab, strings, settled, target_vocab=None,
                   constraint=None, search_weights=None, target_prefix=None):
  """Text in, text out, all in graph (tensorflow-text tokenizer).

  Args:
    vocab: the inputs' Vocabulary (encodes `strings`).
    strings: tf.string [batch]; empty (or blank) strings give empty outputs.
    settled: a `machine.SettledDecode` (hp.batch_size is not used here).
    target_vocab: the targets' Vocabulary (decodes the outputs); None: vocab.
    constraint: None, or a `constraints.DecodeConstraint`
      (`search.decode`).
    search_weights: None, or the model's `search.fixed_search_weights` as
      `settled` says (int8, weights_first, laid_out_kernels).
    target_prefix: None, or int32 [batch, prefix_len] each output's first
      target ids, 0-padded (`prefix`).
  Returns:
    {"outputs": tf.string [batch] (or [batch, beam] with
    hp.multiple_outputs: beams or samples),
    "scores": float32 [batch] (or [batch, beam]), "ids": int32 [batch(,
    beam), out_len] the outputs' ids}.
  """
  result = search.search_with_hparams(model, encode_inputs(vocab, strings),
                                      settled, constraint, search_weights,
                                      target_prefix)
  return output_texts(target_vocab or vocab, strings, result,
                      settled.hp.multiple_outputs)


def output_texts(target_vocab, strings, result, multiple_outputs):
  """`decode_strings`' result from the search's (`search.decode`) for
  `strings`: its outputs as text, "" for a blank string."""
  ids, scores = result["outputs"], result["scores"]
  if multiple_outputs:
    beams = tf.shape(ids)[1]
    flat = target_vocab.decode(tf.reshape(ids, [-1, tf.shape(ids)[2]]))
    text = tf.reshape(flat, [-1, beams])
    blank = tf.equal(tf.strings.strip(strings), "")[:, tf.newaxis]
  else:
    text = target_vocab.decode(ids)
    blank = tf.equal(tf.strings.strip(strings), "")
  return {"outputs": tf.where(blank, tf.constant(""), text),
          "scores": scores, "ids": ids}


# An XLA search's inputs are padded to a multiple of this many tokens (and
# their rows to a power of two), so that a few compiled shapes serve every
# small batch (`Decoder`, decode hparam xla_lines).
XLA_TOKEN_BUCKET = 16


def xla_shape(rows, tokens):
  """(rows, tokens) of the compiled search that decodes int32 [rows,
  tokens] inputs: the next power of two, the next multiple of
  XLA_TOKEN_BUCKET."""
  return (1 << max(0, rows - 1).bit_length(),
          -(-tokens // XLA_TOKEN_BUCKET) * XLA_TOKEN_BUCKET)


def padded_for_xla(ids):
  """int32 [rows, tokens] inputs (0-padded, EOS-ended) -> the same padded
  to `xla_shape`: more PAD columns, and copies of the first row (which
  end with it, so the search takes no more steps)."""
  rows, tokens = xla_shape(*ids.shape)
  padded = np.zeros([rows, tokens], np.int32)
  padded[:ids.shape[0], :ids.shape[1]] = ids
  padded[ids.shape[0]:, :ids.shape[1]] = ids[0]
  return padded


def output_ids(row):
  """An output's ids as a list, EOS included (a row cut at its limit, without
  EOS, is kept whole): the ids its attention is computed on."""
  ids = [int(i) for i in row]
  if EOS_ID in ids:
    return ids[:ids.index(EOS_ID) + 1]
  return [i for i in ids if i != PAD_ID]


class Decoder:
  """A model and its vocabularies with a traced text-to-text search.

  The tf.function takes tf.string [None], so batches of any size and length
  reuse one graph, and the search's weights are made once, here
  (`search.fixed_search_weights`): a Decoder decodes with the weights the
  model had when it was made.

  With decode hparam xla_lines, a greedy or beam batch of at most that
  many lines (and no target prefixes) is tokenized in the graph, then
  searched by `search.decode` compiled with XLA (the tensorflow-text ops
  have no XLA kernels) over its ids padded to `xla_shape`, one compile a
  shape: for small batches of small models the graph's per-op cost is
  most of a step, and XLA fuses the ops. The outputs are the graph's.

  Args:
    model: a trained Transformer.
    vocab: its (input) `t2tlite.data.vocab.Vocabulary`.
    settled: `machine.settle`'s SettledDecode (its hp: the decode hparams).
    target_vocab: its target Vocabulary; None: vocab (shared).
    constraint: None, or the `constraints.DecodeConstraint` every output
      obeys (see `t2tlite.problem_decoding.decode_constraint`).
  """

  def __init__(self, model, vocab, settled, target_vocab=None,
               constraint=None):
    if not isinstance(settled, machine.SettledDecode):
      raise TypeError(f"Decoder takes settled decode hparams, got "
                      f"{type(settled).__name__}: machine.settle(hp)")
    self.model, self.vocab = model, vocab
    self.settled, self.hp = settled, settled.hp
    self.target_vocab = target_vocab or vocab
    self.constraint = constraint
    weights = search.fixed_search_weights(
        model, settled.int8, settled.weights_first,
        laid_out_kernels=settled.laid_out_kernels)

    def run(strings, target_prefix=None):
      return decode_strings(model, vocab, strings, settled, self.target_vocab,
                            constraint, weights, target_prefix)

    # Without AutoGraph: the search's loops and branches are tf.while_loop
    # and tf.cond already, and converting the model's Python code took
    # most of a decoder's start. The search with target prefixes is
    # traced on first use: requests without them run the graph without.
    strings_spec = tf.TensorSpec([None], tf.string)
    self._decode = tf.function(run, input_signature=[strings_spec],
                               autograph=False)
    self._decode_with_prefix = tf.function(
        run, input_signature=[strings_spec,
                              tf.TensorSpec([None, None], tf.int32)],
        autograph=False)
    self._weights = weights
    self._text_search = None  # `_searcher`'s
    self._xla_search = None
    self._xla_failed = set()  # shapes (rows, tokens) XLA failed on
    if self.hp.xla_lines:
      self._xla_search = self._compiled_search(weights)

  def _compiled_search(self, weights):
    """(the graph's tokenizer, the XLA search over padded ids, the graph's
    detokenizer) for `decode_batch`."""
    model, hp = self.model, self.hp
    # One search: a batch this small gains nothing from being split, and
    # one XLA cluster runs its ops in order anyway.
    plan = strategy.DecodePlan.from_settled(dataclasses.replace(
        self.settled, hp=dataclasses.replace(hp, concurrent_searches=1)))
    constraint = self.constraint
    encode = tf.function(lambda strings: encode_inputs(self.vocab, strings),
                         input_signature=[tf.TensorSpec([None], tf.string)],
                         autograph=False)
    # Traced once for ids of any shape; XLA compiles each shape it meets.
    compiled = tf.function(
        lambda ids: search.decode(model, ids, plan, constraint, weights,
                                  static_shapes=True),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
        jit_compile=True, autograph=False)
    texts = tf.function(
        lambda strings, result: output_texts(
            self.target_vocab, strings, result, hp.multiple_outputs),
        autograph=False, reduce_retracing=True)
    return encode, compiled, texts

  def _searcher(self):
    """The text search without prefixes: kept by an earlier process where
    t2tlite's trace cache is in use and holds it (`trace_cache`), else
    traced here (and kept, where the cache is in use)."""
    if self._text_search is None:
      self._text_search = trace_cache.search_function(
          self._decode, self.model, self.settled, self.vocab,
          self.target_vocab, self.constraint, self._weights)
    return self._text_search

  def _uses_xla(self, lines):
    """Whether a batch of `lines` lines without prefixes is searched with
    XLA (decode hparam xla_lines; greedy and beam search)."""
    return (self._xla_search is not None and not self.hp.sampling and
            0 < lines <= self.hp.xla_lines)

  def _decode_with_xla(self, strings):
    """The XLA route's result for `strings`, or None where XLA failed on
    their shape (then and for later batches of it, the graph decodes)."""
    encode, compiled, texts = self._xla_search
    strings = tf.constant(strings, tf.string)
    ids = encode(strings).numpy()
    rows = ids.shape[0]
    padded = padded_for_xla(ids)
    if padded.shape in self._xla_failed:
      return None
    try:
      result = compiled(tf.constant(padded))
    except tf.errors.OpError as error:
      # XLA speeds a search up; its failure (a damaged entry of the
      # persistent cache, a cache folder that filled up) must not stop one.
      self._xla_failed.add(padded.shape)
      cache = xla_cache.in_use()
      logging.warning(
          "decode hparam xla_lines: the XLA search of a %dx%d batch failed "
          "(%s: %s); such batches are searched in the graph instead.%s",
          *padded.shape, type(error).__name__,
          str(error).splitlines()[0] if str(error) else "",
          f" If {cache} (XLA's cache of compiled searches) holds a damaged "
          "entry, remove that folder." if cache else "")
      return None
    kept = {name: value[:rows] for name, value in result.items()}
    return texts(strings, kept)

  def prefix_ids(self, strings, prefixes):
    """int32 [batch, longest prefix] of prefix texts (None, "": none).

    Raises:
      ValueError: not one prefix per string, or a prefix the target
        vocabulary cannot encode, or longer than its output may hold,
        naming it.
    """
    if len(prefixes) != len(strings):
      raise ValueError(f"{len(prefixes)} target prefixes for "
                       f"{len(strings)} lines: expected one per line")
    ids = prefix_lib.encode_prefixes(self.target_vocab,
                                     [p or "" for p in prefixes])
    lengths = self.vocab.encode(tf.constant(strings, tf.string))
    limits = lengths.row_lengths().numpy() + 1 + self.hp.extra_length
    if self.model.config.position_encoding == "learned":
      limits = [min(limit, self.model.config.max_length) for limit in limits]
    prefix_lib.check_prefixes(ids, limits)
    return prefix_lib.padded(ids)

  def decode_batch(self, strings, prefixes=None, with_ids=False):
    """list of str -> (outputs, scores): a str and a float per input, or with
    return_beams (num_samples > 1) a list of each per input (best first;
    samples in order).

    Args:
      prefixes: None, or a target prefix (str; "" for none) per input:
        each output starts with its prefix.
      with_ids: also return the outputs' ids (the first output's, cut after
        EOS, a list of ints per input) as a third list.
    """
    strings = list(strings)
    prefixed = prefixes is not None and any(p and p.strip() for p in prefixes)
    result = None
    # Traced and called with the search's graph options, from any thread.
    with graph_options.one_round():
      if not prefixed and self._uses_xla(len(strings)):
        result = self._decode_with_xla(strings)
      if result is None and prefixed:
        result = self._decode_with_prefix(
            tf.constant(strings, tf.string),
            self.prefix_ids(strings, prefixes))
      elif result is None:
        result = self._searcher()(tf.constant(strings, tf.string))
    outputs = result["outputs"].numpy().tolist()
    if self.hp.multiple_outputs:
      outputs = [[b.decode("utf-8") for b in beams] for beams in outputs]
    else:
      outputs = [b.decode("utf-8") for b in outputs]
    scores = result["scores"].numpy().tolist()
    if not with_ids:
      return outputs, scores
    ids = result["ids"].numpy()
    if self.hp.multiple_outputs:
      ids = ids[:, 0]
    return outputs, scores, [output_ids(row) for row in ids]

  def decode_lines(self, lines, progress=True, prefixes=None):
    """Decodes lines in batches of similar length, returned in input order.

    Args:
      lines: list of str (one sentence each, without line breaks).
      prefixes: None, or a list beside `lines`: each line's target prefix
        ("" for none), which its output starts with.
      progress: log a line after each batch.
    Returns:
      (outputs, scores) lists aligned with `lines`; an empty (or blank) line
      gives "" and score 0.0 (lists of them with return_beams) undecoded.
    """
    hp = self.hp
    if prefixes is not None:
      self.prefix_ids(lines, prefixes)  # errors name the line's number
    beams = hp.outputs_per_input if hp.multiple_outputs else None
    # A list of its own for each blank line (a caller may change one).
    outputs = [[""] * beams if beams else "" for _ in lines]
    scores = [[0.0] * beams if beams else 0.0 for _ in lines]
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
      texts, batch_scores = self.decode_batch(
          [lines[i] for i in batch],
          None if prefixes is None else [prefixes[i] for i in batch])
      for i, text, score in zip(batch, texts, batch_scores):
        outputs[i], scores[i] = text, score
      if progress:
        logging.info("Decoded %d of %d sentences.",
                     min(start + hp.batch_size, len(order)), len(order))
    return outputs, scores
