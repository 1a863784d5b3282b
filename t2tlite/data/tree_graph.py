"""Linearized trees to bracketed trees with their words, as TensorFlow ops
(for the SavedModel of a parsing run; `trees.delinearize` is the Python
counterpart, which also repairs malformed sequences).

    (S (NP XX )NP (VP XX )VP )S  +  "John runs"
    -> (S (NP (XX John)) (VP (XX runs)))
"""
import tensorflow as tf

from t2tlite.data.trees import ESCAPES, PLACEHOLDER_TAG


def escape_words(words):
  """tf.string words with the brackets a tree cannot hold spelled as the
  Penn Treebank does (`(` -> -LRB-, `)` -> -RRB-)."""
  for bracket, escaped in ESCAPES.items():
    words = tf.strings.regex_replace(words, "\\" + bracket, escaped)
  return words


def bracketed_trees(linearized, sentences):
  """Puts the words of `sentences` into linearized trees.

  Args:
    linearized: tf.string [batch], well-formed linearized trees (as the tree
      constraint makes them), e.g. "(S (NP XX )NP )S"; tags are taken in
      order for the words.
    sentences: tf.string [batch], the sentences, words separated by
      whitespace.
  Returns:
    tf.string [batch] bracketed trees (the format of `trees.Tree.__str__`).
    Words beyond the tags (an input cut to the model's length) are attached
    as (XX word) at the end of the root, and tags beyond the words are left
    out, as `trees.delinearize` repairs; an empty sequence gives
    (TOP (XX w1) (XX w2) ...); a blank sentence "".
  """
  words = escape_words(tf.strings.split(sentences)).to_tensor("")
  tokens = tf.strings.split(linearized)
  valid = tf.sequence_mask(tokens.row_lengths())
  tokens = tokens.to_tensor("")
  first = tf.strings.substr(tokens, 0, 1)
  is_tag = valid & (first != "(") & (first != ")")
  tag_number = tf.math.cumsum(tf.cast(is_tag, tf.int32), axis=1) - 1
  num_words = tf.shape(words)[1]
  row_words = tf.reduce_sum(tf.cast(words != "", tf.int32), axis=1)
  tag_word = tf.gather(words, tf.clip_by_value(tag_number, 0, num_words - 1),
                       batch_dims=1)
  pieces = tf.where(is_tag, "(" + tokens + " " + tag_word + ")",
                    tf.where(first == ")", ")", tokens))
  kept = valid & ~(is_tag & (tag_number >= row_words[:, tf.newaxis]))
  trees = tf.strings.reduce_join(tf.ragged.boolean_mask(pieces, kept),
                                 axis=1, separator=" ")
  trees = tf.strings.regex_replace(trees, " \\)", ")")

  tags = tf.reduce_sum(tf.cast(is_tag, tf.int32), axis=1)
  word_valid = tf.sequence_mask(row_words, num_words)
  leftover = word_valid & (tf.range(num_words)[tf.newaxis] >=
                           tags[:, tf.newaxis])
  extra = tf.strings.reduce_join(
      tf.ragged.boolean_mask(f"({PLACEHOLDER_TAG} " + words + ")", leftover),
      axis=1, separator=" ")
  has_extra, empty = extra != "", trees == ""
  trees = tf.where(
      has_extra & ~empty,
      tf.strings.regex_replace(trees, "\\)$", "") + " " + extra + ")",
      trees)
  trees = tf.where(has_extra & empty, "(TOP " + extra + ")", trees)
  return tf.where(tf.strings.strip(sentences) == "", "", trees)
