"""The tf.Module an export saves: tokenizer and search inside one graph.

Signatures (TF Serving's signature_name; the three translating ones take
the input key "inputs" and return the keys "outputs" and "scores"):

    serving_default  inputs tf.string [batch], raw UTF-8 text
                     -> outputs tf.string [batch] text detokenized by the
                        target vocabulary, scores float32 [batch]
    translate_with_prefix
                     inputs tf.string [batch] as serving_default, and
                     target_prefixes tf.string [batch]: each output starts
                     with its prefix ("" for none); a prefix longer than
                     its output's limit (input length + extra_length) or
                     with a piece the target vocabulary does not know
                     fails the request, naming it
                     -> outputs, scores as serving_default
    translate_ids    inputs int32 [batch, len], ids 0-padded, each row
                     ending with EOS (1)
                     -> outputs int32 [batch, out_len] ids ending with EOS,
                        0-padded; scores float32 [batch]
    translate_to_language
                     (a model of a mixture of problems only) inputs
                     tf.string [batch] as serving_default, and
                     target_language tf.string [batch]: the tag of that
                     language ("de": <2de>) goes before its line, as
                     t2t-decoder --target_language (a line starting with
                     a known tag keeps it; "" for such a line; blank lines
                     stay empty); an unknown language, or "" for an
                     untagged line, fails the request, naming the
                     languages the model knows
                     -> outputs, scores as serving_default
    score            inputs tf.string [batch] source text, targets
                     tf.string [batch] their translations
                     -> scores float32 [batch] log P(target | input), EOS
                        included (`t2tlite.decode.scoring`, as t2t-score);
                        normalized_scores float32 [batch] per target token;
                        lengths int32 [batch] target tokens with EOS;
                        token_scores float32 [batch, len], 0-padded;
                        a model of a mixture of problems takes each source
                        line with its target-language tag first ("<2de> A
                        dog."), failing as translate_to_language for a line
                        without one
    score_to_language
                     (a mixture's only) inputs, targets as score, and
                     target_language tf.string [batch] as
                     translate_to_language
                     -> as score

With the decode hparam return_beams (or num_samples > 1 when sampling),
outputs and scores gain a beam (sample) axis after the batch axis (best
first). Sampling hparams are fixed at export like the others; a sampled
output depends only on sampling_seed and its input. Scores are those of
t2t-decoder: beam search's length-penalised log-probability (greedy: the
log-probability).

Input rules, applied in the graph so that no request fails:
  * text is made valid UTF-8 first: invalid bytes become U+FFFD;
  * ids outside [0, input vocab_size) become UNK (2); a row ends at its
    first EOS;
  * an input longer than max_input_length - 1 tokens keeps its first
    max_input_length - 1 tokens, then EOS is appended, so the encoder never
    sees more than max_input_length (= hparams.max_length) positions;
  * empty or blank text gives "" with score 0; an id row without tokens
    gives a row of 0s with score 0;
  * `score` truncates targets as inputs (max_input_length - 1 tokens, then
    EOS); an empty target scores EOS alone, an empty input is EOS alone;
  * a batch of 0 inputs gives 0 outputs.
Only TensorFlow core and tensorflow-text ops are used (stock TF Serving links
both); nothing runs Python at serving time.

An int8 export (decode hparam int8, settled with int8_per_call) checks at
each request that the int8 kernel computes where it is served
(`search.int8_or_float`: it needs
TensorFlow's oneDNN path, TF_ENABLE_ONEDNN_OPTS=1 in the server's
environment on CPUs where TensorFlow leaves it off); where it does not, the
request runs the float32 search instead (the same outputs as a float32
export), never an error.
"""

import tensorflow as tf

from t2tlite import graph_options, run_dir
from t2tlite.data import languages
from t2tlite.decode import decoding, scoring, search
from t2tlite.ids import EOS_ID, PAD_ID, UNK_ID
from t2tlite.layers.search_weights import SearchWeights

TEXT_SIGNATURE = "serving_default"
IDS_SIGNATURE = "translate_ids"
PREFIX_SIGNATURE = "translate_with_prefix"
PREFIX_KEY = "target_prefixes"
LANGUAGE_SIGNATURE = "translate_to_language"
SCORE_LANGUAGE_SIGNATURE = "score_to_language"
LANGUAGE_KEY = "target_language"
SCORE_SIGNATURE = "score"
INPUT_KEY = "inputs"
TARGET_KEY = "targets"


def valid_utf8(strings):
  """tf.string [...] with invalid UTF-8 replaced by U+FFFD (same shape)."""
  return tf.strings.unicode_transcode(
      strings, input_encoding="UTF-8", output_encoding="UTF-8",
      errors="replace", replacement_char=0xFFFD)


def truncate_and_end(tokens, max_input_length):
  """Ragged tokens (no EOS) -> model inputs with EOS, at most max length.

  Args:
    tokens: int32 RaggedTensor [batch, None].
    max_input_length: int >= 2, positions the encoder may see.
  Returns:
    int32 [batch, <= max_input_length]: the first max_input_length - 1
    tokens of each row, then EOS, 0-padded.
  """
  tokens = tokens[:, :max_input_length - 1]
  eos = tf.fill([tokens.nrows(), 1], tf.constant(EOS_ID, tokens.dtype))
  return tf.concat([tokens, eos], axis=1).to_tensor(default_value=PAD_ID)


def clean_ids(ids, vocab_size):
  """Client ids [batch, len] -> int32 RaggedTensor of the tokens before each
  row's first EOS, padding dropped, out-of-range ids replaced by UNK."""
  ids = tf.where((ids < 0) | (ids >= vocab_size), UNK_ID, ids)
  before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=1) == 0
  return tf.ragged.boolean_mask(ids, before_eos & (ids != PAD_ID))


def _zero_where(empty, x):
  """x [batch, ...] with the rows where empty [batch] is true set to 0."""
  empty = tf.reshape(empty, [-1] + [1] * (x.shape.rank - 1))
  return tf.where(empty, tf.zeros_like(x), x)


class _TruncatingVocab:
  """A Vocabulary whose encode keeps at most `max_tokens` tokens a row, so
  that `decoding.decode_strings` (which appends EOS) stays within the limit."""

  def __init__(self, vocab, max_tokens):
    self.vocab, self.max_tokens = vocab, max_tokens

  def encode(self, strings):
    return self.vocab.encode(strings)[:, :self.max_tokens]

  def decode(self, ids):
    return self.vocab.decode(ids)


def prefix_ids(target_vocab, target_prefixes):
  """tf.string [batch] target prefixes -> int32 [batch, longest], 0-padded
  (an empty string: none), after an assertion that each encodes without
  UNK (a piece the target vocabulary does not know)."""
  ids = target_vocab.encode(valid_utf8(target_prefixes))
  ids = tf.cast(ids.to_tensor(default_value=PAD_ID), tf.int32)
  check = tf.debugging.assert_equal(
      tf.reduce_any(tf.equal(ids, UNK_ID)), False,
      message="target prefix the target vocabulary cannot encode (it holds "
      "a piece the vocabulary does not know)")
  with tf.control_dependencies([check]):
    return tf.identity(ids)


def translate_text(search_ids, vocab, settled, max_input_length, inputs,
                   target_vocab=None, postprocess=None, target_prefixes=None):
  """Text in, text out (the serving_default signature).

  Args:
    search_ids: callable(ids int32 [batch, src_len], prefix int32 [batch,
      prefix_len] or None) -> `search.search_with_hparams`' result: the
      model's search as `settled` says (`ServingModule` shares one between
      signatures).
    vocab: the model's (input) Vocabulary.
    settled: the `machine.SettledDecode` it runs.
    max_input_length: longest model input in tokens, EOS included.
    inputs: tf.string [batch].
    target_vocab: the Vocabulary of its outputs; None: vocab.
    postprocess: None, or callable(outputs tf.string [n], inputs tf.string
      [n]) -> tf.string [n] applied to the decoded text (every beam).
    target_prefixes: None, or tf.string [batch], each output's start (""
      for none; the translate_with_prefix signature).
  Returns:
    {"outputs": tf.string [batch(, beam)], "scores": float32 [batch(, beam)]}.
  """
  text = valid_utf8(inputs)
  truncating = _TruncatingVocab(vocab, max_input_length - 1)
  prefix = None
  if target_prefixes is not None:
    prefix = prefix_ids(target_vocab or vocab, target_prefixes)
  result = decoding.output_texts(
      target_vocab or vocab, text,
      search_ids(decoding.encode_inputs(truncating, text), prefix),
      settled.hp.multiple_outputs)
  # Generated pieces may join into invalid UTF-8 (byte pieces); REST clients
  # need valid JSON strings.
  outputs = valid_utf8(result["outputs"])
  if postprocess is not None:
    if settled.hp.multiple_outputs:
      beams = tf.shape(outputs)[1]
      flat = postprocess(tf.reshape(outputs, [-1]),
                         tf.repeat(text, beams))
      outputs = tf.reshape(flat, tf.shape(outputs))
    else:
      outputs = postprocess(outputs, text)
  blank = tf.equal(tf.strings.strip(text), "")
  return {"outputs": outputs, "scores": _zero_where(blank, result["scores"])}


def tag_inputs(inputs, target_language, target_languages):
  """inputs tf.string [batch] as `languages.tag_line` gives them, by
  target_language tf.string [batch] ("" for a line starting with its own
  tag) and a {language: tag} dict: the language's tag before each line
  that is not blank and starts with no known tag of its own (which wins),
  known tags elsewhere in a line escaped. An unknown language, or none for
  a line that needs one, fails (InvalidArgumentError) naming the known
  ones."""
  names = sorted(target_languages)
  known = ", ".join(names)
  tags = tf.constant([target_languages[n] for n in names])
  match = tf.equal(target_language[:, tf.newaxis],
                   tf.constant(names)[tf.newaxis, :])
  given = tf.not_equal(target_language, "")
  pattern = languages.tag_pattern(target_languages)
  blank = tf.equal(tf.strings.strip(inputs), "")
  # `languages.line_language`: a known tag, then whitespace or the end.
  own = tf.strings.regex_full_match(inputs, f"(?s){pattern}(?:\\s.*)?")
  unknown = tf.debugging.Assert(
      tf.reduce_all(tf.reduce_any(match, axis=1) | ~given),
      [f"unknown target_language: this model knows {known}; got",
       target_language], summarize=16)
  needed = tf.debugging.Assert(
      tf.reduce_all(given | own | blank),
      [f"a target language is needed (target_language, or a tag such as "
       f"{target_languages[names[0]]} starting the line): this model knows "
       f"{known}"])
  with tf.control_dependencies([unknown, needed]):
    escaped = tf.strings.regex_replace(inputs, pattern, "< 2\\1>")
    # A line's own tag, the first, stays a tag.
    escaped = tf.where(own, tf.strings.regex_replace(
        escaped, "^< " + pattern[1:], "<2\\1>", replace_global=False),
                       escaped)
    tag = tf.gather(tags, tf.argmax(tf.cast(match, tf.int32), axis=1))
    tagged = tf.strings.join([tag, escaped], " ")
    return tf.where(blank, inputs,
                    tf.where(own | ~given, escaped, tagged))


def translate_ids(search_ids, vocab_size, max_input_length, inputs):
  """Ids in, ids out (the translate_ids signature).

  Args:
    inputs: int32 [batch, len], 0-padded rows ending with EOS.
    (others as in `translate_text`; vocab_size: the input vocabulary's,
    ids at or above it are UNK)
  Returns:
    {"outputs": int32 [batch(, beam), out_len], "scores": float32
    [batch(, beam)]}.
  """
  tokens = clean_ids(inputs, vocab_size)
  ids = truncate_and_end(tokens, max_input_length)
  result = search_ids(ids, None)
  empty = tf.equal(tokens.row_lengths(), 0)
  return {"outputs": _zero_where(empty, result["outputs"]),
          "scores": _zero_where(empty, result["scores"])}


def score_text(model, vocab, target_vocab, max_input_length, inputs,
               targets):
  """Pairs of text in, their log-probabilities out (the score signature).

  Args:
    inputs, targets: tf.string [batch].
    (others as in `translate_text`)
  Returns:
    `scoring.summarize`'s dict: "scores", "normalized_scores", "lengths"
    [batch] and "token_scores" [batch, tgt_len].
  """
  source = truncate_and_end(vocab.encode(valid_utf8(inputs)),
                            max_input_length)
  target = truncate_and_end(target_vocab.encode(valid_utf8(targets)),
                            max_input_length)
  return scoring.summarize(scoring.token_log_probs(model, source, target),
                           target)


def _traced(fn, *input_specs):
  """`fn` traced once, without AutoGraph, into a concrete function of
  `input_specs`; its concurrent searches' calls keep a search's graph
  options (`graph_options.one_round`) in the SavedModel."""
  with graph_options.one_round():
    return tf.function(fn, input_signature=list(input_specs),
                       autograph=False).get_concrete_function()


def _variable(tensor):
  """A variable holding `tensor`, saved with an export and never trained."""
  return tf.Variable(tensor, trainable=False)


def _saved_search_weights(fixed):
  """The search's weights that are no model variable, as variables.

  Args:
    fixed: `search.fixed_search_weights`'s `SearchWeights`.
  Returns:
    (the `SearchWeights` reading them, each kernel variant of its type;
    {"values": {path: tf.Variable}, "kernels" and "output_kernels": {path:
    {the variant's field: tf.Variable}}}: plain dicts, which a SavedModel
    tracks, under the names of today's exports.)
  """
  saved = {"values": {path: _variable(weight) for path, weight
                      in fixed.values.items()
                      if not isinstance(weight, tf.Variable)}}
  variants = {}
  for field in ("kernels", "output_kernels"):
    saved[field], variants[field] = {}, {}
    for path, kernel in getattr(fixed, field).items():
      saved[field][path] = {name: _variable(tensor) for name, tensor
                            in kernel._asdict().items()}
      variants[field][path] = type(kernel)(**saved[field][path])
  weights = SearchWeights({**fixed.values, **saved["values"]}, **variants)
  return weights, saved


class ServingModule(tf.Module):
  """Model weights + vocabulary + the functions of its signatures.

  The Keras model is not an attribute (SavedModel would trace Keras's own
  default signature for it): the functions close over it, and the
  tf.Variables under its Keras variables are tracked in `model_weights`.
  (Tracking the Keras variables instead saves a second, copied variable for
  each, which TF1-style loaders such as TF Serving and saved_model_cli never
  restore: "Could not find variable ...".) The search's weights that are
  not model variables (the output projection's decoding layout, int8
  kernels, casts: `search.fixed_search_weights`) are made once, here, and
  saved as variables in `search_weights` (`_saved_search_weights`), so that
  a served request does not make them again.

  Args:
    model: a trained Transformer.
    vocab: its (input) `t2tlite.data.vocab.Vocabulary` (a tf.Module holding
      the tensorflow-text SentencepieceTokenizer, whose sentencepiece model
      bytes are saved in the graph).
    settled: `machine.settle(hp, int8_per_call=True)`'s SettledDecode,
      fixed in the graph (hp.batch_size is unused: clients batch).
  Attributes:
    hp: the settled DecodeHParams the graph runs (an export records
      them).
    max_input_length: longest input in tokens with EOS; default
      model.config.max_length (hparams.max_length).
    target_vocab: the Vocabulary outputs are detokenized with; None: vocab.
    constraint: None, or the DecodeConstraint the translating signatures'
      outputs obey (`problem_decoding.decode_constraint`).
    postprocess: None, or the text signature's in-graph postprocess
      (`Problem.postprocess_graph`; parsing: bracketed trees with the words).
    target_languages: a mixture's {language: tag}: adds the
      translate_to_language signature; None or {} for one problem.
  """

  def __init__(self, model, vocab, settled, max_input_length=None, name=None,
               target_vocab=None, constraint=None, postprocess=None,
               target_languages=None):
    super().__init__(name=name)
    self.model_weights = {path: variable.value for path, variable
                          in run_dir.model_variables(model).items()}
    self.vocab = vocab
    self.target_vocab = target_vocab or vocab
    self.max_input_length = int(max_input_length or model.config.max_length)
    if self.max_input_length < 2:
      raise ValueError(f"max_input_length={self.max_input_length}: need >= 2 "
                       "(one token and EOS)")
    length = self.max_input_length
    if not settled.int8_per_call and settled.int8:
      raise ValueError("an int8 export picks int8 at each request where it "
                       "is served: settle with int8_per_call=True")
    self.hp = settled.hp
    # Not held: the held int8 product is no core op, and TF Serving may
    # lack it (`exporter.check_serving_ops`).
    fixed = search.fixed_search_weights(
        model, settled.int8, settled.weights_first, held=False,
        laid_out_kernels=settled.laid_out_kernels)
    weights, self.search_weights = _saved_search_weights(fixed)
    # Traced once, here, into concrete functions: tf.saved_model.save
    # traces a tf.function attribute again in its own context (its cache
    # key includes the save context), which doubled an export's tracing;
    # a concrete function is saved as it is. Without AutoGraph, as the
    # Decoder (BUILD_NOTES.md, "Graphs traced without AutoGraph").
    # The search of ids without a prefix is one function that the text,
    # language and ids signatures call: traced and saved once, not once a
    # signature (t2t-exporter 0.83x; BUILD_NOTES.md, as above).
    searched = _traced(
        lambda ids: search.search_with_hparams(model, ids, settled,
                                               constraint, weights),
        tf.TensorSpec([None, None], tf.int32))

    def search_ids(ids, prefix):
      if prefix is None:
        return searched(ids)
      return search.search_with_hparams(model, ids, settled, constraint,
                                        weights, prefix)

    self.translate_text = _traced(
        lambda inputs: translate_text(search_ids, vocab, settled, length,
                                      inputs, self.target_vocab,
                                      postprocess),
        tf.TensorSpec([None], tf.string, name=INPUT_KEY))
    self.translate_with_prefix = _traced(
        lambda inputs, target_prefixes: translate_text(
            search_ids, vocab, settled, length, inputs, self.target_vocab,
            postprocess, target_prefixes),
        tf.TensorSpec([None], tf.string, name=INPUT_KEY),
        tf.TensorSpec([None], tf.string, name=PREFIX_KEY))
    self.translate_to_language = target_languages and _traced(
        lambda inputs, target_language: translate_text(
            search_ids, vocab, settled, length,
            tag_inputs(inputs, target_language, target_languages),
            self.target_vocab, postprocess),
        tf.TensorSpec([None], tf.string, name=INPUT_KEY),
        tf.TensorSpec([None], tf.string, name=LANGUAGE_KEY))
    self.translate_ids = _traced(
        lambda inputs: translate_ids(search_ids, vocab.size, length, inputs),
        tf.TensorSpec([None, None], tf.int32, name=INPUT_KEY))
    def scored(inputs, targets, target_language=None):
      if target_languages:  # "": each line starts with its own tag
        inputs = tag_inputs(inputs, tf.zeros_like(inputs) if
                            target_language is None else target_language,
                            target_languages)
      return score_text(model, vocab, self.target_vocab, length, inputs,
                        targets)

    pair = (tf.TensorSpec([None], tf.string, name=INPUT_KEY),
            tf.TensorSpec([None], tf.string, name=TARGET_KEY))
    self.score = _traced(scored, *pair)
    self.score_to_language = target_languages and _traced(
        scored, *pair, tf.TensorSpec([None], tf.string, name=LANGUAGE_KEY))

  def signatures(self):
    """{signature name: concrete function} for tf.saved_model.save."""
    signatures = {TEXT_SIGNATURE: self.translate_text,
                  PREFIX_SIGNATURE: self.translate_with_prefix,
                  IDS_SIGNATURE: self.translate_ids,
                  SCORE_SIGNATURE: self.score}
    if self.translate_to_language:
      signatures[LANGUAGE_SIGNATURE] = self.translate_to_language
      signatures[SCORE_LANGUAGE_SIGNATURE] = self.score_to_language
    return signatures
