"""Exports a trained run for CTranslate2 (a fast C++ inference engine),
with CTranslate2's own Python spec API (`ctranslate2.specs`) and converter
base class, as its OpenNMT-tf converter does: no hand-written files.

    export_ctranslate2(output_dir) -> OUTPUT_DIR/ctranslate2/
      model.bin, config.json, shared_vocabulary.json or
      source_vocabulary.json + target_vocabulary.json   (CTranslate2's)
      source.spm.model, target.spm.model               (sentencepiece)

Supported: the `transformer` model, post-norm (paper) or pre-norm, shared
or separate vocabularies, sinusoid or learned positions, d_k == d_v. The
word pointer (parsing) has no CTranslate2 form and is refused, as is any
other model; each refusal is one line naming the hparam.

How t2tlite's conventions are declared to CTranslate2:
  * tokens are the sentencepiece pieces, id order kept: CTranslate2 takes
    and returns piece strings, and the user tokenizes with sentencepiece
    (source.spm.model) and detokenizes with target.spm.model;
  * EOS (id 1, "</s>") ends sources (add_source_eos) and outputs;
  * the decoder starts from id 0 (PAD, "<pad>"), as t2tlite's does
    (targets shifted right with 0): decoder_start_token is "<pad>";
  * UNK is id 2 ("<unk>");
  * embeddings are scaled by sqrt(d_model) in both (scale_embeddings);
  * positions: t2tlite interleaves sin and cos ([2i] = sin, [2i+1] = cos)
    where CTranslate2's built-in sinusoids put all sines first, so the
    table itself is exported (`position_encodings.encodings`):
    SINUSOID_POSITIONS positions, or a learned table's max_length;
  * the output projection is the target embedding (tied), without bias.
t2tlite never outputs PAD; CTranslate2 callers pass
suppress_sequences=[["<pad>"]] for the same search (docs/decoding.md).
"""
import os
import shutil
import uuid

import numpy as np

from t2tlite import run_dir
from t2tlite.ids import EOS_ID, PAD_ID, UNK_ID

EXPORT_SUBDIR = "ctranslate2"
SOURCE_SPM = "source.spm.model"
TARGET_SPM = "target.spm.model"
# Sinusoids have no length limit in t2tlite; CTranslate2 reads an exported
# table, so it is made this long (inputs and outputs stop there).
SINUSOID_POSITIONS = 1024


def unsupported(info):
  """The reason `info`'s model cannot be exported (one line), or None."""
  hp = info.hparams
  if info.model != "transformer":
    return (f"model {info.model}: only the transformer exports to "
            "CTranslate2")
  if hp.word_pointer:
    return ("hparam word_pointer=true: the word pointer has no CTranslate2 "
            "form (export with word_pointer=false runs only)")
  if hp.d_k != hp.d_v:
    return (f"hparams d_k={hp.d_k}, d_v={hp.d_v}: CTranslate2 needs one "
            "head size (d_k == d_v)")
  if hp.norm_position not in ("pre", "post"):
    return f"hparam norm_position={hp.norm_position}: expected pre or post"
  return None


def _transposed(weights, path):
  """A Keras kernel [in, out] as CTranslate2's linear weight [out, in]."""
  return np.ascontiguousarray(weights[path].T)


def _layer_norm(spec, weights, path):
  spec.gamma = weights[f"{path}/gamma"]
  spec.beta = weights[f"{path}/beta"]


def _self_attention(spec, weights, prefix):
  fused = np.concatenate([weights[f"{prefix}/w_{n}"] for n in "qkv"],
                         axis=1)
  spec.linear[0].weight = np.ascontiguousarray(fused.T)
  spec.linear[1].weight = _transposed(weights, f"{prefix}/w_o")
  _layer_norm(spec.layer_norm, weights, f"{prefix}_residual/layer_norm")


def _cross_attention(spec, weights, prefix):
  spec.linear[0].weight = _transposed(weights, f"{prefix}/w_q")
  keys_values = np.concatenate([weights[f"{prefix}/w_k"],
                                weights[f"{prefix}/w_v"]], axis=1)
  spec.linear[1].weight = np.ascontiguousarray(keys_values.T)
  spec.linear[2].weight = _transposed(weights, f"{prefix}/w_o")
  _layer_norm(spec.layer_norm, weights, f"{prefix}_residual/layer_norm")


def _feed_forward(spec, weights, prefix):
  spec.linear_0.weight = _transposed(weights, f"{prefix}/w1")
  spec.linear_0.bias = weights[f"{prefix}/b1"]
  spec.linear_1.weight = _transposed(weights, f"{prefix}/w2")
  spec.linear_1.bias = weights[f"{prefix}/b2"]
  _layer_norm(spec.layer_norm, weights, f"{prefix}_residual/layer_norm")


def _positions(layer, config):
  """float32 [positions, d_model]: the table CTranslate2 adds."""
  count = (config.max_length if config.position_encoding == "learned" else
           max(SINUSOID_POSITIONS, config.max_length))
  return np.asarray(layer.encodings(0, count), np.float32)


def _special_pieces(pieces, which):
  for token_id, name in ((PAD_ID, "<pad>"), (EOS_ID, "</s>"),
                         (UNK_ID, "<unk>")):
    if pieces[token_id] != name:
      raise ValueError(f"the {which} vocabulary's id {token_id} is "
                       f"{pieces[token_id]!r}: expected {name!r} (t2tlite's "
                       "sentencepiece ids 0 pad, 1 eos, 2 unk)")


def build_spec(model, source_pieces, target_pieces):
  """The CTranslate2 TransformerSpec of a trained t2tlite Transformer.

  Args:
    model: a Transformer (built, weights restored), without word pointer.
    source_pieces, target_pieces: list of str, the piece of every id (the
      same list twice for a shared vocabulary).
  Returns:
    a `ctranslate2.specs.TransformerSpec` with every weight set.
  """
  from ctranslate2.specs import common_spec, transformer_spec
  c = model.config
  _special_pieces(source_pieces, "source")
  _special_pieces(target_pieces, "target")
  head_dim = c.d_k if c.d_k * c.num_heads != c.d_model else None
  kwargs = dict(pre_norm=c.norm_position == "pre",
                activation=common_spec.Activation.RELU, head_dim=head_dim)
  spec = transformer_spec.TransformerSpec(
      transformer_spec.TransformerEncoderSpec(c.num_layers, c.num_heads,
                                              **kwargs),
      transformer_spec.TransformerDecoderSpec(c.num_layers, c.num_heads,
                                              **kwargs))
  spec.config.unk_token = target_pieces[UNK_ID]
  spec.config.eos_token = target_pieces[EOS_ID]
  spec.config.bos_token = target_pieces[PAD_ID]
  spec.config.decoder_start_token = target_pieces[PAD_ID]
  spec.config.add_source_eos = True
  spec.config.layer_norm_epsilon = c.layer_norm_epsilon
  spec.register_source_vocabulary(list(source_pieces))
  spec.register_target_vocabulary(list(target_pieces))

  weights = {path: np.asarray(v.numpy(), np.float32)
             for path, v in run_dir.model_variables(model).items()}
  source_table = ("input_embedding/embeddings" if model.target_vocab_size
                  else "embedding/embeddings")
  spec.encoder.embeddings[0].weight = weights[source_table]
  spec.encoder.position_encodings.encodings = _positions(
      model.encoder_positions, c)
  for i, layer in enumerate(spec.encoder.layer):
    _self_attention(layer.self_attention, weights,
                    f"encoder_{i}/self_attention")
    _feed_forward(layer.ffn, weights, f"encoder_{i}/feed_forward")
  spec.decoder.embeddings.weight = weights["embedding/embeddings"]
  spec.decoder.position_encodings.encodings = _positions(
      model.decoder_positions, c)
  for i, layer in enumerate(spec.decoder.layer):
    _self_attention(layer.self_attention, weights,
                    f"decoder_{i}/self_attention")
    _cross_attention(layer.attention, weights,
                     f"decoder_{i}/encdec_attention")
    _feed_forward(layer.ffn, weights, f"decoder_{i}/feed_forward")
  if c.norm_position == "pre":
    _layer_norm(spec.encoder.layer_norm, weights, "encoder_norm")
    _layer_norm(spec.decoder.layer_norm, weights, "decoder_norm")
  spec.decoder.projection.weight = weights["embedding/embeddings"]
  return spec


def _converter(model, source_pieces, target_pieces):
  from ctranslate2.converters.converter import Converter

  class T2TLiteConverter(Converter):
    """CTranslate2's converter interface over `build_spec`."""

    def _load(self):
      return build_spec(model, source_pieces, target_pieces)

  return T2TLiteConverter()


def export_ctranslate2(output_dir, export_dir=None, checkpoint_path=None,
                       quantization=None):
  """Writes the run's model in CTranslate2's format.

  Args:
    output_dir: the training folder.
    export_dir: the model folder to write; default OUTPUT_DIR/ctranslate2.
      It must not exist (it is written under a temporary name beside it and
      renamed when complete).
    checkpoint_path: a checkpoint prefix or folder; default the newest.
    quantization: None (float32 weights), or one of CTranslate2's weight
      types (int8, int8_float32, float16, bfloat16, ...).
  Returns:
    export_dir.
  Raises:
    ImportError: ctranslate2 is not installed (names the extra).
    ValueError: a model CTranslate2 cannot run (one line), or export_dir
      exists.
  """
  try:
    import ctranslate2  # noqa: F401
  except ImportError:
    raise ImportError("export_format=ctranslate2 needs the ctranslate2 "
                      "package: pip install 't2tlite[ctranslate2]'") from None
  from t2tlite.data.vocab import Vocabulary
  info = run_dir.read_run_info(output_dir)
  reason = unsupported(info)
  if reason:
    raise ValueError(f"output_dir={output_dir} cannot be exported to "
                     f"CTranslate2: {reason}")
  export_dir = export_dir or os.path.join(output_dir, EXPORT_SUBDIR)
  if os.path.exists(export_dir):
    raise ValueError(f"export_dir={export_dir} exists: remove it or name "
                     "another folder")
  model, info, _ = run_dir.load_trained_model(output_dir, checkpoint_path)
  source_pieces = Vocabulary.from_file(info.vocab_file).pieces()
  target_pieces = (source_pieces if info.shares_vocabulary else
                   Vocabulary.from_file(info.target_vocab_file).pieces())
  parent = os.path.dirname(os.path.abspath(export_dir))
  os.makedirs(parent, exist_ok=True)
  tmp = os.path.join(parent, f".tmp-ctranslate2-{uuid.uuid4().hex}")
  try:
    _converter(model, source_pieces, target_pieces).convert(
        tmp, quantization=quantization)
    shutil.copyfile(info.vocab_file, os.path.join(tmp, SOURCE_SPM))
    shutil.copyfile(info.target_vocab_file, os.path.join(tmp, TARGET_SPM))
    os.rename(tmp, export_dir)
  finally:
    if os.path.exists(tmp):
      shutil.rmtree(tmp)
  return export_dir


def translate_lines(model_dir, lines, beam_size=1, extra_length=50,
                    batch_size=32, intra_threads=0, **options):
  """Translates text lines with an exported model in CTranslate2 (float32
  on the CPU): sentencepiece tokenization, CTranslate2's search as
  t2t-decoder's, detokenization. Empty lines give "".

  As t2t-decoder: no PAD output, and each output stops at its input's
  tokens + EOS + extra_length tokens (EOS included). CTranslate2 takes one
  limit a batch (the longest input's), so a longer output is cut to its
  own limit afterwards: for greedy search exactly t2t-decoder's output (a
  greedy path does not depend on the limit before reaching it).

  Args:
    intra_threads: CTranslate2's threads (0: its default). On a busy
      machine 1 can be much faster than several.
    options: more `Translator.translate_batch` options.
  Returns:
    list of str, one per line.
  """
  import ctranslate2
  import sentencepiece as spm
  source = spm.SentencePieceProcessor(
      model_file=os.path.join(model_dir, SOURCE_SPM))
  target = spm.SentencePieceProcessor(
      model_file=os.path.join(model_dir, TARGET_SPM))
  translator = ctranslate2.Translator(model_dir, device="cpu",
                                      compute_type="float32",
                                      intra_threads=intra_threads)
  outputs = [""] * len(lines)
  todo = [i for i, line in enumerate(lines) if line.strip()]
  tokens = [source.encode(lines[i], out_type=str) for i in todo]
  if not todo:
    return outputs
  longest = max(len(t) for t in tokens)
  results = translator.translate_batch(
      tokens, max_batch_size=batch_size, beam_size=beam_size,
      max_decoding_length=longest + 1 + extra_length,
      suppress_sequences=[[target.id_to_piece(PAD_ID)]], **options)
  for i, pieces, result in zip(todo, tokens, results):
    limit = len(pieces) + 1 + extra_length  # t2tlite's, EOS included
    outputs[i] = target.decode_pieces(result.hypotheses[0][:limit])
  return outputs

