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
from absl import logging
import tensorflow as tf

from t2tlite.decode import machine, search
from t2tlite.ids import EOS_ID


def encode_inputs(vocab, strings):
  """tf.string [batch] -> int32 [batch, src_len]: ids + EOS, 0-padded."""
  ids = vocab.encode(strings)
  eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))
  return tf.concat([ids, eos], axis=1).to_tensor()


def decode_strings(model, vocab, strings, settled, target_vocab=None,
                   constraint=None, search_weights=None):
  """Text in, text out, all in graph (tensorflow-text tokenizer).

  Args:
    vocab: the inputs' Vocabulary (encodes `strings`).
    strings: tf.string [batch]; empty (or blank) strings give empty outputs.
    settled: a `machine.SettledDecode` (hp.batch_size is not used here).
    target_vocab: the targets' Vocabulary (decodes the outputs); None: vocab.
    constraint: None, or a `constraints.DecodeConstraint`
      (`search.decode_ids`).
    search_weights: None, or `search.fixed_search_weights(model,
      settled.int8, settled.weights_first)`.
  Returns:
    {"outputs": tf.string [batch] (or [batch, beam] with
    hp.multiple_outputs: beams or samples),
    "scores": float32 [batch] (or [batch, beam])}.
  """
  result = search.search_with_hparams(model, encode_inputs(vocab, strings),
                                      settled, constraint, search_weights)
  ids, scores = result["outputs"], result["scores"]
  target_vocab = target_vocab or vocab
  if settled.hp.multiple_outputs:
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
  (`search.fixed_search_weights`): a Decoder decodes with the weights the model
  had when it was made. (Not XLA-compiled: the tensorflow-text tokenizer ops have
  no XLA kernels; `search.decode_ids` alone compiles.)

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
    weights = search.fixed_search_weights(model, settled.int8,
                                          settled.weights_first)
    # Without AutoGraph: the search's loops and branches are tf.while_loop
    # and tf.cond already, and converting the model's Python code took
    # most of a decoder's start.
    self._decode = tf.function(
        lambda strings: decode_strings(model, vocab, strings, settled,
                                       self.target_vocab, constraint,
                                       weights),
        input_signature=[tf.TensorSpec([None], tf.string)],
        autograph=False)

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
