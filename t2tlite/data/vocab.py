"""Vocabularies: trained by sentencepiece, run in-graph by tensorflow-text.

The same `Vocabulary.encode` turns text into ids in t2t-datagen, in training and
in the exported serving graph, so there is one tokenizer everywhere.

Fixed ids (every problem): 0 = PAD, 1 = EOS, 2 = UNK; no BOS.
"""
import hashlib
import io
import os
import re

from absl import logging
import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
# The op that creates tensorflow-text's sentencepiece resource, for a
# resource under a shared name (`_SharedSentencepieceModel`).
from tensorflow_text.python.ops.sentencepiece_tokenizer import (
    gen_sentencepiece_tokenizer)

from t2tlite import files
from t2tlite.ids import EOS_ID, PAD_ID, UNK_ID  # noqa: F401  (re-exported)

MODEL_TYPES = ("bpe", "unigram", "word")

# A "word" model is a closed vocabulary: one piece per distinct
# whitespace-separated token of the corpus, whatever vocab_size says, taken
# as written (no Unicode normalisation, no splitting of digits or scripts),
# so that e.g. every tree symbol of a linearized parse is exactly one id.
_WORD_MODEL_OPTIONS = dict(
    use_all_vocab=True, hard_vocab_limit=False,
    normalization_rule_name="identity", split_by_number=False,
    split_by_unicode_script=False, max_sentencepiece_length=512)


def train_sentencepiece(texts_fn, path, vocab_size, model_type="bpe",
                        input_sentence_size=1_000_000, byte_fallback=False,
                        user_defined_symbols=()):
  """Trains a sentencepiece model; writes it to `path` (tmp name, then rename).

  A size the corpus cannot support is changed, with a warning: too large
  (sentencepiece: "Vocabulary size too high") becomes the largest size
  sentencepiece accepts; too small for the corpus' characters (and the 256
  byte pieces with byte_fallback) becomes the smallest.

  Args:
    texts_fn: a function returning a fresh iterator of str sentences (called
      again if training has to be retried with a smaller size).
    path: where the `.model` file goes.
    vocab_size: requested number of pieces, special ids included; None
      for "word", which has as many as the corpus has tokens.
    model_type: "bpe", "unigram" or "word" (one id per whitespace-separated
      token seen; unseen tokens become UNK).
    input_sentence_size: at most this many sentences, sampled by sentencepiece,
      are used for training (bounds memory on large corpora).
    byte_fallback: characters outside the vocabulary are encoded as UTF-8
      byte pieces instead of UNK (lossless; needs 256 extra pieces).
    user_defined_symbols: pieces reserved whole, ids 3, 4, ... in order
      (the target-language tags of a mixture, `t2tlite.data.languages`):
      always one id wherever they occur, never part of another piece.

  Returns:
    The number of pieces of the trained model.
  """
  if model_type not in MODEL_TYPES:
    raise ValueError(f"model_type={model_type!r}: expected one of "
                     f"{MODEL_TYPES}")
  options = _WORD_MODEL_OPTIONS if model_type == "word" else {}
  # A word model's size is a soft limit (hard_vocab_limit=False) that every
  # token seen exceeds: the special ids and one token.
  size = 4 if vocab_size is None and model_type == "word" else vocab_size
  while True:
    model = io.BytesIO()
    try:
      spm.SentencePieceTrainer.train(
          sentence_iterator=texts_fn(), model_writer=model,
          vocab_size=size, model_type=model_type,
          pad_id=PAD_ID, eos_id=EOS_ID, unk_id=UNK_ID, bos_id=-1,
          input_sentence_size=input_sentence_size,
          byte_fallback=byte_fallback,
          shuffle_input_sentence=True, num_threads=os.cpu_count() or 1,
          minloglevel=2, user_defined_symbols=list(user_defined_symbols),
          **options)
      break
    except RuntimeError as error:
      too_high = re.search(r"value <= (\d+)", str(error))
      if too_high and int(too_high.group(1)) < size:
        supported = int(too_high.group(1))
        logging.warning(
            "Vocabulary size %d is too large for this corpus; sentencepiece "
            "supports at most %d. Using %d.", size, supported, supported)
        size = supported
        continue
      too_low = re.search(r"required_chars\. (\d+) vs (\d+)", str(error))
      if too_low and int(too_low.group(2)) > size:
        needed = int(too_low.group(2))
        logging.warning(
            "Vocabulary size %d is below the %d pieces this corpus needs (one "
            "per character%s, plus special ids). Using %d.", size, needed,
            " and per byte" if byte_fallback else "", needed)
        size = needed
        continue
      raise
  files.atomic_write_bytes(path, model.getvalue())
  return spm.SentencePieceProcessor(model_proto=model.getvalue()).vocab_size()


class _SharedSentencepieceModel(tf.saved_model.experimental.TrackableResource):
  """The sentencepiece model, as a resource under a name shared by its digest.

  tensorflow-text creates the resource private to the kernel that ran the
  creating op, and TensorFlow drops its eager kernels whenever it clears its
  kernel cache (`tf.random.set_seed`, `keras.utils.set_random_seed`,
  `keras.backend.clear_session`); every later use of the tokenizer then fails
  with NotFoundError "Resource localhost/_0_SentencepieceOp/... does not
  exist". A resource with a shared name belongs to the resource manager and
  outlives the kernel; one per distinct model, in this process and in a
  loaded SavedModel (which runs `_create_resource` again).
  """

  def __init__(self, model_proto, shared_name):
    super().__init__()
    self._model_proto, self._shared_name = model_proto, shared_name
    _ = self.resource_handle  # creates the resource now

  def _create_resource(self):
    return gen_sentencepiece_tokenizer.sentencepiece_op(
        model=self._model_proto, shared_name=self._shared_name)


class Vocabulary(tf.Module):
  """A sentencepiece model executed by tensorflow-text (graph-safe, exportable).

  Attributes:
    path: the model file it was loaded from (or None).
    model_proto: the serialized sentencepiece model (bytes).
    size: number of ids (the model's output vocabulary size).
    tokenizer: the `tensorflow_text.SentencepieceTokenizer`.
  """

  def __init__(self, model_proto, path=None, name=None):
    super().__init__(name=name)
    self.path = path
    self.model_proto = model_proto
    # Names of its own per model: in a loaded SavedModel, sentencepiece
    # resources created under the same name are one resource, so a second
    # vocabulary (the targets') would silently run the first.
    digest = hashlib.sha256(model_proto).hexdigest()[:16]
    self.tokenizer = tf_text.SentencepieceTokenizer(
        model=model_proto, out_type=tf.int32, add_bos=False, add_eos=False,
        name=f"sentencepiece_{digest}")
    # The tokenizer's methods all read `_model_resource.resource_handle`.
    if not hasattr(self.tokenizer, "_model_resource"):
      raise RuntimeError("This tensorflow-text's SentencepieceTokenizer has "
                         "no _model_resource; t2tlite's vocab.py needs "
                         "updating.")
    self.tokenizer._model_resource = _SharedSentencepieceModel(
        model_proto, f"t2tlite_sentencepiece_{digest}")
    processor = spm.SentencePieceProcessor(model_proto=model_proto)
    self.size = processor.vocab_size()
    if (processor.pad_id(), processor.eos_id(), processor.unk_id()) != (
        PAD_ID, EOS_ID, UNK_ID):
      raise ValueError(
          f"{path or 'sentencepiece model'}: expected pad/eos/unk ids "
          f"{PAD_ID}/{EOS_ID}/{UNK_ID}, found {processor.pad_id()}/"
          f"{processor.eos_id()}/{processor.unk_id()}")

  @classmethod
  def from_file(cls, path):
    with open(path, "rb") as f:
      return cls(f.read(), path=path)

  def encode(self, strings):
    """Text to ids, without EOS.

    Args:
      strings: tf.string [batch].
    Returns:
      tf.RaggedTensor int32 [batch, None].
    """
    return self.tokenizer.tokenize(strings)

  def decode(self, ids):
    """Ids to text: stops at the first EOS, ignores padding.

    Args:
      ids: int32/int64 [batch, length], dense or ragged.
    Returns:
      tf.string [batch].
    """
    if isinstance(ids, tf.RaggedTensor):
      ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.cast(ids, tf.int32)
    before_eos = tf.math.cumsum(
        tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1) == 0
    keep = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))
    return self.tokenizer.detokenize(tf.ragged.boolean_mask(ids, keep))

  def encode_text(self, text, add_eos=True):
    """Python convenience: one str to a list of ids (with EOS by default)."""
    ids = self.encode(tf.constant([text]))[0].numpy().tolist()
    return ids + [EOS_ID] if add_eos else ids

  def decode_ids(self, ids):
    """Python convenience: a list of ids to one str."""
    return self.decode(tf.constant([list(ids) or [PAD_ID]]))[0].numpy().decode(
        "utf-8")

  def id_to_piece(self, ids):
    """Pieces of ids (for inspection): int [n] -> tf.string [n]."""
    return self.tokenizer.id_to_string(tf.constant(ids, tf.int32))

  def pieces(self):
    """list of str: the piece of every id, 0 .. size - 1."""
    return [p.decode("utf-8")
            for p in self.id_to_piece(list(range(self.size))).numpy()]
