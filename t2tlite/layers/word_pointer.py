"""A pointer from the decoder to the source word its next word token is for.

Where every target token of one kind stands for one source word in order
(parsing: each POS tag tags the next word of the sentence), the decoder
otherwise has to count its own such tokens to know where it is in the
source; on small data it loses count, and the tags and brackets shift onto
neighbouring words (docs/results.md, "WSJ sample parsing"). The pointer
gives the count away: decoder position t gets, added to its input
embedding, a learned projection of the encoder output at the first piece of
source word k_t, where k_t is the number of word tokens among the decoder
inputs up to t (the decoder inputs are the targets shifted right, so k_t
words are done and the next word token is for word k_t). Past the last word
it points at the source's EOS. Transition-based parsers keep the same
pointer as the front of their buffer.

Both counts come from two tables over the vocabularies: which input ids
begin a word, and which target ids are word tokens.
"""
import keras
import tensorflow as tf

from t2tlite.ids import EOS_ID
from t2tlite.layers.linear import position_wise, read_weight


@keras.saving.register_keras_serializable(package="t2tlite")
class WordPointer(keras.layers.Layer):
  """The decoder's pointer to its next source word (module doc).

  Args:
    word_starts: list of bool, one per input id: the piece begins a word.
    word_tokens: list of bool, one per target id: the token stands for one
      source word.
    d_model: model size.
  """

  def __init__(self, word_starts, word_tokens, d_model, **kwargs):
    super().__init__(**kwargs)
    self.word_starts = [bool(x) for x in word_starts]
    self.word_tokens = [bool(x) for x in word_tokens]
    self.d_model = d_model
    self._starts_table = tf.constant(self.word_starts)
    self._tokens_table = tf.constant(self.word_tokens)

  def build(self, input_shape=None):
    self.kernel = self.add_weight(
        name="kernel", shape=(self.d_model, self.d_model),
        initializer="glorot_uniform")

  def word_positions(self, inputs):
    """Where each source word begins.

    Args:
      inputs: int32 [batch, src_len] source ids (0-padded, ending with EOS).
    Returns:
      (int32 [batch, src_len]: the position of the first piece of word k at
      [:, k] for k below the word count, then the position of EOS (or of
      the last word start when there is no EOS); int32 [batch]: the index
      of that last entry, word count included, where a pointer past the
      end stops).
    """
    ids = tf.clip_by_value(inputs, 0, len(self.word_starts) - 1)
    starts = tf.gather(self._starts_table, ids) | (inputs == EOS_ID)
    length = tf.shape(inputs)[1]
    # Starts first, in order, then the rest: a stable sort on a 0/1 key.
    key = tf.cast(~starts, tf.int32) * length + tf.range(length)[tf.newaxis]
    positions = tf.argsort(key, axis=1, stable=True)
    last = tf.maximum(tf.reduce_sum(tf.cast(starts, tf.int32), axis=1) - 1, 0)
    return positions, last

  def words_done(self, decoder_inputs):
    """int32 [rows, len] decoder input ids -> int32 [rows, len], the word
    tokens among them up to and including each position."""
    return tf.cumsum(self.is_word_token(decoder_inputs), axis=1)

  def is_word_token(self, ids):
    """int32 ids (any shape) -> int32 0/1 of the same shape."""
    ids = tf.clip_by_value(ids, 0, len(self.word_tokens) - 1)
    return tf.cast(tf.gather(self._tokens_table, ids), tf.int32)

  def project(self, memory, search_weights=None):
    """[batch, src_len, d_model] encoder output -> its projection, what a
    pointer adds (made once per search when decoding)."""
    kernel = read_weight(self.kernel, self.compute_dtype, search_weights)
    return position_wise(tf.cast(memory, self.compute_dtype), kernel)

  def call(self, decoder_inputs, memory, inputs):
    """The pointer vectors of a teacher-forced decoder.

    Args:
      decoder_inputs: int32 [batch, tgt_len] (the targets shifted right).
      memory: [batch, src_len, d_model] encoder output.
      inputs: int32 [batch, src_len] source ids.
    Returns:
      [batch, tgt_len, d_model] in the compute dtype.
    """
    positions, last = self.word_positions(inputs)
    words = tf.minimum(self.words_done(decoder_inputs), last[:, tf.newaxis])
    pointed = tf.gather(positions, words, batch_dims=1)
    return tf.gather(self.project(memory), pointed, batch_dims=1)

  def step(self, words_done, projected, positions, last):
    """The pointer vectors of one cached decoding step.

    Args:
      words_done: int32 [rows] word tokens written so far, including this
        step's input; rows = batch * beams, a batch element's beams
        consecutive.
      projected: [batch, src_len, d_model], `project` of the memory.
      positions, last: `word_positions` of the inputs.
    Returns:
      [rows, 1, d_model].
    """
    beams = tf.shape(words_done)[0] // tf.shape(positions)[0]
    element = tf.range(tf.shape(words_done)[0]) // beams
    words = tf.minimum(words_done, tf.gather(last, element))
    pointed = tf.gather_nd(positions, tf.stack([element, words], axis=1))
    vectors = tf.gather_nd(projected, tf.stack([element, pointed], axis=1))
    return vectors[:, tf.newaxis, :]

  def get_config(self):
    config = super().get_config()
    config.update(word_starts=self.word_starts, word_tokens=self.word_tokens,
                  d_model=self.d_model)
    return config
