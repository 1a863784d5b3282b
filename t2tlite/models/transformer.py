"""The Transformer (section 3) as a keras.Model: a teacher-forced training
call, `encode`, and the same decoder run one position at a time with caches
(`prepare_decoding`, `decode_step`) for beam search.

Ids are int32; PAD_ID (0) is padding and also the decoder's start symbol
(targets are shifted right by one position, filling with it, as in
tensor2tensor).
"""
import functools

import keras
import tensorflow as tf

from t2tlite import registry
from t2tlite.layers.int8 import rounded_scales
from t2tlite.layers.attention import MASK_BIAS, causal_bias, padding_bias
from t2tlite.layers.dropout import Dropout
from t2tlite.layers.embedding import PositionEncoding, SharedEmbedding
from t2tlite.layers.linear import decoding_kernels, int8_kernels
from t2tlite.layers.search_weights import SearchWeights
from t2tlite.layers.transformer_layers import DecoderLayer, EncoderLayer
from t2tlite.layers.word_pointer import WordPointer
from t2tlite.models.config import TransformerConfig


def shift_right(targets):
  """[batch, len] targets -> decoder inputs [0, t_0, ..., t_{len-2}]."""
  return tf.pad(targets, [[0, 0], [1, 0]])[:, :-1]


@keras.saving.register_keras_serializable(package="t2tlite")
@registry.models.register("transformer")
class Transformer(keras.Model):
  """Encoder-decoder Transformer with one shared embedding matrix.

  With a separate target vocabulary, the encoder has its own embedding
  (`input_embedding`) and `embedding` holds the targets' matrix, still shared
  by the decoder input and the pre-softmax projection (section 3.4).

  Args:
    vocab_size: shared (or source) vocabulary size.
    config: a TransformerConfig (or its dict form, as get_config gives it).
    target_vocab_size: the targets' own vocabulary size; None: they share
      the source vocabulary (one matrix for all three uses).
    word_pointer: None, or {"word_starts": bool per input id, "word_tokens":
      bool per target id}: the decoder input gets a pointer to the source
      word its next word token is for (`layers.word_pointer`; parsing).
  Call: {"inputs": int32 [batch, src_len], "targets": int32 [batch, tgt_len]}
    -> float32 logits [batch, tgt_len, target_vocab_size (or vocab_size)].
  """

  def __init__(self, vocab_size, config, target_vocab_size=None,
               word_pointer=None, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.target_vocab_size = target_vocab_size
    self.config = c = TransformerConfig.coerce(config)
    policy = self.dtype_policy
    if target_vocab_size is not None:
      self.input_embedding = SharedEmbedding(
          vocab_size, c.d_model, name="input_embedding", dtype=policy)
    self.embedding = SharedEmbedding(
        vocab_size if target_vocab_size is None else target_vocab_size,
        c.d_model, name="embedding", dtype=policy)
    self.word_pointer = None
    if word_pointer is not None:
      self.word_pointer = WordPointer(
          word_pointer["word_starts"], word_pointer["word_tokens"],
          c.d_model, name="word_pointer", dtype=policy)
    self.encoder_positions = PositionEncoding(
        c.position_encoding, c.max_length, name="encoder_positions",
        dtype=policy)
    self.decoder_positions = PositionEncoding(
        c.position_encoding, c.max_length, name="decoder_positions",
        dtype=policy)
    self.embedding_dropout = Dropout(c.dropout, dtype=policy)
    sizes = dict(
        num_heads=c.num_heads, d_k=c.d_k, d_v=c.d_v, d_ff=c.d_ff,
        dropout=c.dropout, attention_dropout=c.attention_dropout,
        relu_dropout=c.relu_dropout, norm_position=c.norm_position,
        layer_norm_epsilon=c.layer_norm_epsilon, dtype=policy)
    self.encoder_layers = [EncoderLayer(**sizes, name=f"encoder_{i}")
                           for i in range(c.num_layers)]
    self.decoder_layers = [DecoderLayer(**sizes, name=f"decoder_{i}")
                           for i in range(c.num_layers)]
    if c.norm_position == "pre":
      self.encoder_norm = keras.layers.LayerNormalization(
          epsilon=c.layer_norm_epsilon, name="encoder_norm", dtype=policy)
      self.decoder_norm = keras.layers.LayerNormalization(
          epsilon=c.layer_norm_epsilon, name="decoder_norm", dtype=policy)

  def build(self, features_shape=None):
    hidden = (None, None, self.config.d_model)
    self.embedding.build()
    if self.target_vocab_size is not None:
      self.input_embedding.build()
    if self.word_pointer is not None:
      self.word_pointer.build()
    self.encoder_positions.build(hidden)
    self.decoder_positions.build(hidden)
    for layer in self.encoder_layers:
      layer.build(hidden)
    for layer in self.decoder_layers:
      layer.build(hidden, hidden)
    if self.config.norm_position == "pre":
      self.encoder_norm.build(hidden)
      self.decoder_norm.build(hidden)

  @classmethod
  def from_hparams(cls, hp, vocab_size, target_vocab_size=None,
                   word_pointer=None, **kwargs):
    return cls(vocab_size, TransformerConfig.from_hparams(hp),
               target_vocab_size=target_vocab_size,
               word_pointer=word_pointer, **kwargs)

  def _final_norm(self, x, norm_name):
    if self.config.norm_position == "pre":
      return getattr(self, norm_name)(x)
    return x

  def _embed(self, embedding, ids, positions, training, start=0,
             search_weights=None, pointer=None):
    # A search step calls the embedding's `call` itself, as the decoder
    # layers call their feed-forward's (`_StackLayer._feed_forward_block`).
    embedded = (embedding(ids) if search_weights is None else
                embedding.call(ids, search_weights=search_weights))
    x = positions(embedded, start=start)
    if pointer is not None:
      x += pointer
    return self.embedding_dropout(x, training=training)

  @property
  def _source_embedding(self):
    return (self.embedding if self.target_vocab_size is None else
            self.input_embedding)

  def encode(self, inputs, training=False, return_attention_weights=False,
             search_weights=None):
    """Encoder stack.

    Args:
      inputs: int32 [batch, src_len] source ids, 0-padded.
      search_weights: None, or an int8 search's `SearchWeights`, whose
        encoder kernels the layers multiply by (`EncoderLayer.
        call_search`); a float search's encoder computes as training's.
    Returns:
      memory [batch, src_len, d_model] (and a list of per-layer self-attention
      weights [batch, heads, src_len, src_len] when return_attention_weights).
    """
    bias = padding_bias(inputs)
    x = self._embed(self._source_embedding, inputs, self.encoder_positions,
                    training)
    int8_search = search_weights is not None and search_weights.int8
    weights = []
    for layer in self.encoder_layers:
      if int8_search:
        x, w = layer.call_search(x, bias, search_weights)
      else:
        x, w = layer(x, bias, training=training)
      weights.append(w)
    x = self._final_norm(x, "encoder_norm")
    return (x, weights) if return_attention_weights else x

  def decode(self, targets, memory, inputs, training=False,
             return_attention_weights=False):
    """Teacher-forced decoder stack and pre-softmax projection.

    Args:
      targets: int32 [batch, tgt_len] target ids ending with EOS, 0-padded.
      memory: [batch, src_len, d_model] from `encode`.
      inputs: int32 [batch, src_len] the source ids (for the padding mask).
    Returns:
      float32 logits [batch, tgt_len, target vocab] (and per-layer dicts of
      "self"/"encdec" attention weights when return_attention_weights).
    """
    decoder_inputs = shift_right(targets)
    pointer = None
    if self.word_pointer is not None:
      pointer = self.word_pointer(decoder_inputs, memory, inputs)
    logits, weights, _ = self._decoder(
        decoder_inputs, [memory] * len(self.decoder_layers),
        padding_bias(inputs),
        self_bias=causal_bias(tf.shape(decoder_inputs)[1]), training=training,
        pointer=pointer)
    return (logits, weights) if return_attention_weights else logits

  def _decoder(self, decoder_inputs, layer_memories, memory_bias,
               self_bias=None, training=False, start=0, caches=None,
               growing=False, search_weights=None, pointer=None):
    """The decoder stack and output projection, teacher-forced or cached:
    the one place where the decoder is wired.

    Args:
      decoder_inputs: int32 [rows, len] ids at positions start ...
      layer_memories: per decoder layer, the encoder output (teacher-forced:
        `DecoderLayer.call`) or, with caches, its keys and values
        (`DecoderLayer.call_cached`).
      memory_bias: float32 [batch, 1, 1, src_len].
      self_bias: the causal mask when teacher-forced; with growing caches
        the lineage bias (`_lineage_bias`); else None.
      start: int32 scalar, the position of decoder_inputs[:, 0].
      caches: None, or the per-layer self-attention caches.
      growing: the caches grow (else they have a fixed size and `start` is
        the position written).
      search_weights: None, or the search's `SearchWeights`
        (`search_weights`).
      pointer: None, or the word pointer's vectors [rows, len, d_model],
        added to the decoder's input embedding.
    Returns:
      (float32 logits [rows, len, target vocab], per-layer attention weight
      dicts, the updated caches or None).
    """
    x = self._embed(self.embedding, decoder_inputs, self.decoder_positions,
                    training, start=start, search_weights=search_weights,
                    pointer=pointer)
    weights, new_caches = [], []
    for i, layer in enumerate(self.decoder_layers):
      if caches is None:
        x, w = layer(x, layer_memories[i], self_bias, memory_bias,
                     training=training)
      else:
        x, w, new_cache = layer.call_cached(
            x, layer_memories[i], caches[i], self_bias, memory_bias,
            step=None if growing else start, search_weights=search_weights)
        new_caches.append(new_cache)
      weights.append(w)
    logits = self.embedding.logits(self._final_norm(x, "decoder_norm"),
                                   search_weights=search_weights)
    return logits, weights, (new_caches if caches is not None else None)

  def call(self, features, training=False):
    inputs, targets = features["inputs"], features["targets"]
    memory = self.encode(inputs, training=training)
    return self.decode(targets, memory, inputs, training=training)

  def attention_weights(self, features):
    """Every attention map, for visualization (paper appendix).

    Returns:
      dict with "encoder" (list over layers of [batch, heads, src, src]),
      "decoder_self" ([batch, heads, tgt, tgt]) and "encdec"
      ([batch, heads, tgt, src]), float32, from an inference-mode pass.
    """
    inputs, targets = features["inputs"], features["targets"]
    memory, encoder = self.encode(inputs, return_attention_weights=True)
    _, decoder = self.decode(targets, memory, inputs,
                             return_attention_weights=True)
    return {"encoder": encoder,
            "decoder_self": [w["self"] for w in decoder],
            "encdec": [w["encdec"] for w in decoder]}

  def prepare_decoding(self, inputs, max_decode_length=None,
                       search_weights=None):
    """Everything a search needs: the weights cast once, the encoded inputs
    and the initial cache.

    Args:
      inputs: int32 [batch, src_len] source ids.
      max_decode_length: None for caches that grow one position per step
        (graph mode), or an int for fixed-size caches (static shapes: XLA).
      search_weights: `self.search_weights(...)`, to share one copy between
        searches (int8 ones for an int8 search); None: the float ones, made
        here.
    Returns:
      (decode_step(ids, step, cache) -> (logits, cache): `decode_step` bound
      to the search's weights; the initial cache, for batch rows, with the
      encoded inputs in it (cache["per_batch"]["memory"], one copy per batch
      element), so that everything a step reads of a batch element travels
      with the cache: a search may drop elements from it).
    """
    if search_weights is None:
      search_weights = self.search_weights()
    memory = self.decoding_memory(inputs, search_weights)
    cache = self.init_cache(tf.shape(inputs)[0], max_decode_length)
    cache["per_batch"] = dict(cache.get("per_batch", {}), memory=memory)
    return functools.partial(self.decode_step,
                             growing=max_decode_length is None,
                             search_weights=search_weights), cache

  def search_weights(self, int8=False, keep_variables=False,
                     int8_weights_first=False, laid_out_kernels=True):
    """The weights a search reads, a `SearchWeights`: every weight in the
    compute dtype, the output projection's kernel laid out for decoding
    (`SharedEmbedding.output_kernels`) and, in float32 with
    `laid_out_kernels` (as settled for the machine:
    `SettledDecode.laid_out_kernels`), the decoder layers' kernels laid
    out for decoding (`linear.decoding_kernels`): read (and
    under mixed precision cast) once per search, before its loop, rather
    than at every step. Only for code without gradients.

    With int8, the kernels of the encoder and decoder layers and the
    output projection quantized instead (`linear.int8_kernels`,
    `SharedEmbedding.int8_output_kernels`; each self-attention's queries,
    keys and values as one kernel): the search then multiplies them in
    int8 (`t2tlite.layers.int8`); `int8_weights_first` picks the layout
    (`precision.int8_support`).

    keep_variables: a weight already in the compute dtype stays the
    tf.Variable itself rather than a read of it (for weights made once and
    kept: `search.fixed_search_weights`)."""
    dtype = self.compute_dtype

    def read(variable):
      if keep_variables and variable.dtype == dtype:
        return variable.value
      return tf.cast(variable, dtype)

    values = {v.path: read(v) for v in self.weights}
    if int8:
      layers = [*self.encoder_layers, *self.decoder_layers]
      kernels = int8_kernels(
          layers, int8_weights_first,
          fused=[layer.self_attention.input_maps() for layer in layers])
      if dtype != "float32":
        # The feed-forward maps restore their int8 products with scales
        # rounded to the compute dtype, as the recorded int8 outputs of
        # mixed-precision models were made.
        for layer in self.decoder_layers:
          for variable in (layer.feed_forward.w1, layer.feed_forward.w2):
            kernels[variable.path] = rounded_scales(
                kernels[variable.path], dtype)
      return SearchWeights(
          values, kernels=kernels,
          output_kernels=self.embedding.int8_output_kernels(
              int8_weights_first))
    kernels = (decoding_kernels(values, self.decoder_layers)
               if laid_out_kernels else {})
    return SearchWeights(values, kernels=kernels,
                         output_kernels=self.embedding.output_kernels(values))

  def decoding_memory(self, inputs, search_weights=None):
    """Encodes `inputs` once for a search.

    Args:
      inputs: int32 [batch, src_len] source ids.
    Returns:
      {"keys", "values": per-layer encoder-decoder keys and values
      [batch, heads, src_len, d_k|d_v], "bias": float32 [batch, 1, 1,
      src_len]; with a word pointer also "pointer": (the projected memory
      [batch, src_len, d_model], word positions [batch, src_len], last
      word index [batch])}: one copy per batch element, shared by its beams.
    """
    memory = self.encode(inputs, training=False,
                         search_weights=search_weights)
    keys, values = zip(*[layer.memory_keys_values(memory, search_weights)
                         for layer in self.decoder_layers])
    decoding_memory = {"keys": list(keys), "values": list(values),
                       "bias": padding_bias(inputs)}
    if self.word_pointer is not None:
      decoding_memory["pointer"] = (
          self.word_pointer.project(memory, search_weights),
          *self.word_pointer.word_positions(inputs))
    return decoding_memory

  def init_cache(self, batch_size, max_decode_length=None):
    """The self-attention cache of `batch_size` hypotheses.

    Args:
      batch_size: int or int32 scalar.
      max_decode_length: None (a growing cache) or an int (fixed size); see
        `DecoderLayer.init_cache`.
    Returns:
      Fixed size: {"layers": [per-layer dicts]}, each tensor with
      batch_size as its first dimension, so that beam search tiles it to
      the beams and reorders it with them. Growing: {"per_batch":
      {"layers": [...]}, "lineage": int32 [batch_size, 0]}: a search
      neither tiles nor reorders "per_batch" (the beams of a batch element
      append their keys and values side by side; `decode_step`), while
      "lineage", tiled and reordered, records which beam slot wrote each
      position of a hypothesis. With a word pointer also "words_done":
      int32 [batch_size], the word tokens each hypothesis has written.
    """
    layers = [layer.init_cache(batch_size, max_decode_length)
              for layer in self.decoder_layers]
    if max_decode_length is None:
      cache = {"per_batch": {"layers": layers},
               "lineage": tf.zeros([batch_size, 0], tf.int32)}
    else:
      cache = {"layers": layers}
    if self.word_pointer is not None:
      cache["words_done"] = tf.zeros([batch_size], tf.int32)
    return cache

  def decode_step(self, ids, step, cache, memory=None, growing=False,
                  search_weights=None):
    """Logits for position `step` given the token at that position.

    Args:
      ids: int32 [rows] the previous token (0 at step 0, the start symbol);
        rows = batch * beams, a batch element's beams consecutive.
      step: int32 scalar position.
      cache: from `init_cache(rows, ...)` or the previous `decode_step`.
      memory: from `decoding_memory` ([batch, ...]); None: the cache's
        (cache["per_batch"]["memory"], as `prepare_decoding` makes it).
      growing: the cache was made without max_decode_length.
      search_weights: None, or from `search_weights`.
    Returns:
      (float32 logits [rows, target vocab], updated cache).
    """
    pointer, cache = None, dict(cache)
    if memory is None:
      memory = cache["per_batch"]["memory"]
    if self.word_pointer is not None:
      cache["words_done"] += self.word_pointer.is_word_token(ids)
      pointer = self.word_pointer.step(cache["words_done"],
                                       *memory["pointer"])
    if growing:
      layers = cache["per_batch"]["layers"]
      cache["lineage"], self_bias = self._lineage_bias(
          cache["lineage"], tf.shape(layers[0]["k"])[0])
    else:
      layers, self_bias = cache["layers"], None
    logits, _, layers = self._decoder(
        ids[:, tf.newaxis], list(zip(memory["keys"], memory["values"])),
        memory["bias"], self_bias=self_bias, start=step, caches=layers,
        growing=growing, search_weights=search_weights, pointer=pointer)
    if growing:
      return logits[:, 0, :], dict(
          cache, per_batch=dict(cache["per_batch"], layers=layers))
    return logits[:, 0, :], dict(cache, layers=layers)

  @staticmethod
  def _lineage_bias(lineage, batch):
    """The self-attention bias of a growing per-batch cache.

    Row b * beams + j (hypothesis j of batch element b) may see position i
    of slot s, at index i * beams + s of the cache, only where its own
    history was written by slot s: lineage[row, i] == s. A search reorders
    the lineage with the hypotheses, which is far cheaper than reordering
    every layer's keys and values.

    Args:
      lineage: int32 [rows, positions] of the earlier positions.
      batch: int32 scalar, rows / beams.
    Returns:
      (lineage int32 [rows, positions + 1] with each row's own slot
      appended, bias float32 [batch, 1, beams, (positions + 1) * beams]).
    """
    rows = tf.shape(lineage)[0]
    beams = rows // batch
    lineage = tf.concat(
        [lineage, (tf.range(rows) % beams)[:, tf.newaxis]], axis=1)
    seen = tf.equal(lineage[:, :, tf.newaxis], tf.range(beams))
    bias = tf.where(seen, 0.0, MASK_BIAS)  # [rows, positions + 1, beams]
    return lineage, tf.reshape(bias, [batch, 1, beams, -1])

  def build_by_calling(self):
    """Creates every variable: by `build`, which makes them in the order a
    call would, with the same values; then, only if a layer is left unbuilt
    (a subclass's own), by running the model once on a 1-token batch."""
    self.build()
    if all(layer.built for layer in self._flatten_layers(include_self=False)):
      return
    ids = tf.ones([1, 1], tf.int32)
    self({"inputs": ids, "targets": ids})

  def get_build_config(self):
    return {"built": self.built}

  def build_from_config(self, config):
    if config.get("built"):
      self.build_by_calling()

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size,
                  target_vocab_size=self.target_vocab_size,
                  word_pointer=None if self.word_pointer is None else {
                      "word_starts": self.word_pointer.word_starts,
                      "word_tokens": self.word_pointer.word_tokens},
                  config=self.config.to_dict())
    return config

