"""The decoding constraint of linearized parse trees: every output is a
well-formed tree over exactly the input's words.

Targets are the sequences of `t2tlite.data.trees.linearize` over a vocabulary
of one id per tree symbol: opening brackets `(NP`, labelled closings `)NP`,
and tags (`XX`, or POS tags), one per word. The constraint allows

  * an opening bracket first, and inside the root (never a second root),
    only while words are left for it, never past `max_depth` and never
    more than `max_opens_in_a_row` in a row (the WSJ sample's trees reach
    depth 28 and open at most 6 in a row: a model that only ever opens
    would otherwise nest to the limit);
  * a tag inside the root while the input has words without one;
  * the closing bracket of the innermost open constituent once it holds
    something (no empty constituents), the root's only after the last word;
  * EOS once the root is closed;

and only tokens after which the shortest completion (a tag per word left,
a closing per open bracket, EOS) still fits before the length limit, so
closings are forced in time. The shortest tree takes words + 3 tokens; with
less room the output is empty (see `constraints.constrain`).

Words are counted on the input ids: a word starts at each piece that begins
with sentencepiece's word boundary mark (and at UNK in a vocabulary of whole
words), so the count equals `len(text.split())` for the text the ids
encode.
"""
import tensorflow as tf

from t2tlite.decode.constraints import DecodeConstraint
from t2tlite.ids import EOS_ID, PAD_ID, UNK_ID

WORD_BOUNDARY = "\u2581"  # sentencepiece's "▁"

# Kinds of target ids.
OTHER, TAG, OPEN, CLOSE, END = 0, 1, 2, 3, 4


def classify_targets(pieces):
  """Kinds and labels of a tree-symbol vocabulary.

  Args:
    pieces: list of str, the piece of each target id (sentencepiece pieces,
      with or without the word boundary mark).
  Returns:
    (kinds: list of int (OTHER, TAG, OPEN, CLOSE or END) per id, labels:
    list of int per id (the label's index for OPEN/CLOSE, else -1),
    closing: list of int per label index, the id of its closing bracket or
    -1).
  """
  kinds, labels, label_index, closing = [], [], {}, []
  for token_id, piece in enumerate(pieces):
    symbol = piece.lstrip(WORD_BOUNDARY)
    if token_id == EOS_ID:
      kind = END
    elif token_id in (PAD_ID, UNK_ID) or not symbol:
      kind = OTHER
    elif symbol[0] in "()" and len(symbol) > 1:
      kind = OPEN if symbol[0] == "(" else CLOSE
    else:
      kind = TAG
    label = -1
    if kind in (OPEN, CLOSE):
      label = label_index.setdefault(symbol[1:], len(label_index))
      if label == len(closing):
        closing.append(-1)
      if kind == CLOSE:
        closing[label] = token_id
    kinds.append(kind)
    labels.append(label)
  # An opening bracket whose label has no closing id could never be closed.
  kinds = [OTHER if k == OPEN and closing[l] < 0 else k
           for k, l in zip(kinds, labels)]
  return kinds, labels, closing


def word_starts(input_pieces):
  """bool per input id: its piece begins a word. UNK does where every
  piece is a whole word (a "word" vocabulary: UNK is an unseen word), not
  in subword vocabularies, where it stands for characters after a piece
  that began the word."""
  special = (PAD_ID, EOS_ID, UNK_ID)
  whole_words = all(piece.startswith(WORD_BOUNDARY)
                    for i, piece in enumerate(input_pieces)
                    if i not in special)
  return [(i == UNK_ID and whole_words) or
          (i not in special and piece.startswith(WORD_BOUNDARY))
          for i, piece in enumerate(input_pieces)]


def word_pointer_tables(input_pieces, target_pieces):
  """The tables of the decoder's word pointer (`layers.word_pointer`) for
  linearized trees: input ids that begin a word (`word_starts`), target ids
  that are tags (one per word).

  Returns:
    {"word_starts": [bool per input id], "word_tokens": [bool per target
    id]}.
  """
  kinds, _, _ = classify_targets(target_pieces)
  return {"word_starts": word_starts(input_pieces),
          "word_tokens": [kind == TAG for kind in kinds]}


class TreeConstraint(DecodeConstraint):
  """Well-formed linearized trees over the input's words (module doc).

  Args:
    target_pieces: the piece of every target id.
    input_pieces: the piece of every input id.
    max_depth: most constituents open at once.
    max_opens_in_a_row: most opening brackets without a word or closing
      between them.

  State (rows first): "words_left" int32 [rows], tags still to write;
  "depth" int32 [rows], open constituents; "labels" int32 [rows, max_depth],
  their label indices, innermost at depth - 1; "filled" bool [rows], the
  innermost open constituent holds something; "started" bool [rows], the
  root was opened; "opens_in_a_row" int32 [rows]; "limit" int32 [rows],
  the length limit.
  """

  def __init__(self, target_pieces, input_pieces, max_depth=64,
               max_opens_in_a_row=10):
    kinds, labels, closing = classify_targets(target_pieces)
    self.max_opens_in_a_row = max_opens_in_a_row
    self.kinds = tf.constant(kinds, tf.int32)
    self.labels = tf.constant(labels, tf.int32)
    self.closing = tf.constant(closing + [-1], tf.int32)  # never empty
    self.word_starts = tf.constant(word_starts(input_pieces))
    self.max_depth = max_depth

  @classmethod
  def from_vocabularies(cls, input_vocab, target_vocab, **kwargs):
    """From two `t2tlite.data.vocab.Vocabulary` objects."""
    return cls(target_vocab.pieces(), input_vocab.pieces(), **kwargs)

  def count_words(self, inputs):
    """int32 [batch, src_len] ids -> int32 [batch] words."""
    ids = tf.clip_by_value(inputs, 0, tf.shape(self.word_starts)[0] - 1)
    return tf.reduce_sum(
        tf.cast(tf.gather(self.word_starts, ids), tf.int32), axis=1)

  def initial_state(self, inputs, max_lengths):
    batch = tf.shape(inputs)[0]
    return {"words_left": self.count_words(inputs),
            "depth": tf.zeros([batch], tf.int32),
            "labels": tf.zeros([batch, self.max_depth], tf.int32),
            "filled": tf.zeros([batch], tf.bool),
            "started": tf.zeros([batch], tf.bool),
            "opens_in_a_row": tf.zeros([batch], tf.int32),
            "limit": max_lengths}

  def advance(self, state, tokens):
    kind = tf.gather(self.kinds, tokens)
    opens, closes, tags = kind == OPEN, kind == CLOSE, kind == TAG
    depth = state["depth"]
    slot = tf.one_hot(tf.minimum(depth, self.max_depth - 1), self.max_depth,
                      on_value=True, off_value=False)
    pushed = tf.where(slot & opens[:, tf.newaxis],
                      tf.gather(self.labels, tokens)[:, tf.newaxis],
                      state["labels"])
    return dict(
        state,
        words_left=state["words_left"] - tf.cast(tags, tf.int32),
        depth=depth + tf.cast(opens, tf.int32) - tf.cast(closes, tf.int32),
        labels=pushed,
        filled=tf.where(opens, False, state["filled"] | tags | closes),
        started=state["started"] | opens,
        opens_in_a_row=tf.where(
            kind == OTHER, state["opens_in_a_row"],
            tf.where(opens, state["opens_in_a_row"] + 1, 0)))

  def allowed(self, state, step, vocab_size):
    words_left, depth = state["words_left"], state["depth"]
    # Tokens left after this one, and what the shortest completion needs
    # after it for each kind of token written now.
    room = state["limit"] - step - 1
    inside = depth > 0
    tag_ok = inside & (words_left > 0) & (room >= words_left - 1 + depth + 1)
    open_ok = ((inside | ~state["started"]) & (words_left > 0) &
               (depth < self.max_depth) & (room >= words_left + depth + 2) &
               (state["opens_in_a_row"] < self.max_opens_in_a_row))
    close_ok = inside & state["filled"] & ((depth > 1) | (words_left == 0))
    end_ok = state["started"] & ~inside & (words_left == 0)
    innermost = tf.gather(state["labels"], tf.maximum(depth - 1, 0),
                          batch_dims=1)
    closing_id = tf.gather(self.closing, innermost)
    kinds = tf.pad(self.kinds, [[0, vocab_size - tf.shape(self.kinds)[0]]])
    ids = tf.range(vocab_size)[tf.newaxis]
    return ((kinds == TAG)[tf.newaxis] & tag_ok[:, tf.newaxis] |
            (kinds == OPEN)[tf.newaxis] & open_ok[:, tf.newaxis] |
            (ids == closing_id[:, tf.newaxis]) & close_ok[:, tf.newaxis] |
            (kinds == END)[tf.newaxis] & end_ok[:, tf.newaxis])
