"""t2t-exporter --export_format=ctranslate2: CTranslate2 loads the export
and its greedy search gives t2tlite's outputs and log-probabilities (also
with min_length and no_repeat_ngram_size, as its own options), for
post-norm / shared vocabulary / sinusoids and pre-norm / separate
vocabularies / learned positions; unsupported models are refused with one
line. (A trained Multi30k model: tests/support/multi30k_short.py.)"""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from t2tlite import run_dir
from t2tlite.data.vocab import EOS_ID, Vocabulary
from t2tlite.decode.decoding import encode_inputs
from decode_helpers import decode_ids
from t2tlite.export import ctranslate2 as ct2_export

from run_folder import TINY, make_run_folder, multi30k_lines, needs_multi30k
from shared_run import run_copy
from train_helpers import user_env

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="the ctranslate2 extra is not installed")
pytestmark = needs_multi30k
EXTRA_LENGTH = 5
# make_run_folder's arguments; None: the session's shared run (TINY).
VARIANTS = {
    "post_shared_sinusoid": None,
    "pre_separate_learned": dict(
        hp=TINY.replace(norm_position="pre", position_encoding="learned"),
        separate_target_vocab=True),
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def exported(request, tmp_path_factory):
  """(model, source Vocabulary, CTranslate2 model folder, target
  Vocabulary) of a tiny run: a copy of the session's shared run exported by
  the t2t-exporter command, or a run of its own exported by the function
  the command calls (no second process to start)."""
  variant = VARIANTS[request.param]
  if variant is None:
    folder = run_copy(tmp_path_factory, request.param)
    export_dir = subprocess.run(
        [sys.executable, "-m", "t2tlite.bin.t2t_exporter",
         f"--output_dir={folder}", "--export_format=ctranslate2"],
        capture_output=True, text=True, env=user_env(), timeout=180)
    assert export_dir.returncode == 0, export_dir.stderr[-3000:]
    path = export_dir.stdout.strip().splitlines()[-1]
  else:
    folder = str(tmp_path_factory.mktemp(request.param))
    make_run_folder(folder, **variant)
    path = ct2_export.export_ctranslate2(folder)
  assert path == os.path.join(folder, ct2_export.EXPORT_SUBDIR)
  model, info, _ = run_dir.load_trained_model(folder)
  return (model, Vocabulary.from_file(info.vocab_file), path,
          Vocabulary.from_file(info.target_vocab_file))


# t2tlite's decode hparams beside CTranslate2's options of the same name.
SETTINGS = {"plain": ({}, {}),
            "min_length_no_repeats": (
                dict(min_length=4, no_repeat_ngram_size=2),
                dict(min_decoding_length=4, no_repeat_ngram_size=2))}


def _ctranslate2_of(path):
  """(source and target SentencePieceProcessors, float32 Translator) of the
  CTranslate2 export at `path`."""
  import sentencepiece as spm
  source = spm.SentencePieceProcessor(
      model_file=os.path.join(path, ct2_export.SOURCE_SPM))
  target = spm.SentencePieceProcessor(
      model_file=os.path.join(path, ct2_export.TARGET_SPM))
  return source, target, ctranslate2.Translator(path, device="cpu",
                                                compute_type="float32")


# id(model) -> (model, {hparams: search}); the model is held, so that its
# id names no other model while the module runs.
_SEARCHES = {}


def _greedy_search(model, **hparams):
  """t2tlite's greedy search as a tf.function of input ids [1, length],
  made (and traced) once per model and hparams."""
  searches = _SEARCHES.setdefault(id(model), (model, {}))[1]
  key = tuple(sorted(hparams.items()))
  if key not in searches:
    searches[key] = tf.function(
        lambda ids: decode_ids(model, ids, beam_size=1,
                               extra_length=EXTRA_LENGTH, **hparams),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
        autograph=False)
  return searches[key]


def _greedy_ids(search, vocab, line):
  """(output ids before EOS, the search's result) of `line` alone."""
  result = search(encode_inputs(vocab, tf.constant([line])))
  ids = result["outputs"][0].numpy().tolist()
  return (ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids), result


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_ctranslate2_greedy_search_equals_t2tlite(exported, setting):
  ours, theirs = SETTINGS[setting]
  model, vocab, path, _ = exported
  source, target, translator = _ctranslate2_of(path)
  search = _greedy_search(model, **ours)
  for line in multi30k_lines("en", 6):
    ids, result = _greedy_ids(search, vocab, line)
    tokens = source.encode(line, out_type=str)
    assert vocab.encode_text(line, add_eos=False) == [
        source.piece_to_id(t) for t in tokens]
    # One sentence a batch: its own length limit, as in t2tlite.
    (ct2,) = translator.translate_batch(
        [tokens], beam_size=1, return_scores=True, length_penalty=0,
        max_decoding_length=len(tokens) + 1 + EXTRA_LENGTH,
        suppress_sequences=[["<pad>"]], **theirs)
    assert [target.piece_to_id(p) for p in ct2.hypotheses[0]] == ids
    # The same log-probability (EOS included): the same network.
    np.testing.assert_allclose(ct2.scores[0], result["scores"][0],
                               rtol=1e-3, atol=1e-3)


def test_translate_lines_detokenizes_and_keeps_empty_lines(exported):
  """CTranslate2's lines, searched together, are t2tlite's greedy outputs
  of each line alone, detokenized by t2tlite's target vocabulary."""
  model, vocab, path, target_vocab = exported
  lines = multi30k_lines("en", 2)
  outputs = ct2_export.translate_lines(path, [lines[0], "", lines[1]],
                                       extra_length=EXTRA_LENGTH)
  search = _greedy_search(model)
  expected = [target_vocab.decode_ids(_greedy_ids(search, vocab, line)[0])
              for line in lines]
  assert outputs == [expected[0], "", expected[1]]


def test_unsupported_models_are_refused_with_one_line(tmp_path_factory):
  folder = run_copy(tmp_path_factory, checkpoint=False)
  info = run_dir.read_run_info(folder)
  assert ct2_export.unsupported(info) is None
  plugin = dataclasses.replace(info, model="plugin_rnn")
  assert ct2_export.unsupported(plugin) == (
      "model plugin_rnn: only the transformer exports to CTranslate2")
  pointer = dataclasses.replace(info, hparams=info.hparams.replace(
      word_pointer=True))
  assert ct2_export.unsupported(pointer).startswith(
      "hparam word_pointer=true: the word pointer has no CTranslate2 form")
  heads = dataclasses.replace(info, hparams=info.hparams.replace(d_v=16))
  assert "CTranslate2 needs one head size (d_k == d_v)" in (
      ct2_export.unsupported(heads))
  os.makedirs(os.path.join(folder, "ctranslate2"))
  with pytest.raises(ValueError, match="export_dir=.*/ctranslate2 exists"):
    ct2_export.export_ctranslate2(folder)
  # A run CTranslate2 cannot run is refused first, naming the run.
  hparams_file = os.path.join(folder, "hparams.json")
  with open(hparams_file) as f:
    saved = json.load(f)
  with open(hparams_file, "w") as f:
    json.dump(dict(saved, word_pointer=True), f)
  with pytest.raises(ValueError) as caught:
    ct2_export.export_ctranslate2(folder)
  assert str(caught.value).startswith(
      f"output_dir={folder} cannot be exported to CTranslate2: hparam "
      "word_pointer=true: the word pointer has no CTranslate2 form")


@pytest.mark.parametrize("pieces, wrong", [
    (["<pad>", "<s>", "<unk>", "a"], "id 1 is '<s>': expected '</s>'"),
    (["<pad>", "</s>", "<s>", "a"], "id 2 is '<s>': expected '<unk>'")])
def test_a_vocabulary_without_t2tlites_special_ids_is_refused(pieces,
                                                              wrong):
  with pytest.raises(ValueError) as error:
    ct2_export._special_pieces(pieces, "target")
  assert str(error.value).startswith(f"the target vocabulary's {wrong}")
  ct2_export._special_pieces(["<pad>", "</s>", "<unk>", "a"], "target")


def test_exported_sinusoids_reach_past_the_training_length():
  """Sinusoids have no length limit in t2tlite: the table CTranslate2
  reads has SINUSOID_POSITIONS rows, the positions' own values; a learned
  table has its max_length rows."""
  from t2tlite.layers.embedding import PositionEncoding
  for kind, rows in (("sinusoid", ct2_export.SINUSOID_POSITIONS),
                     ("learned", 16)):
    layer = PositionEncoding(kind, max_length=16)
    layer.build((None, None, 8))
    config = TINY.replace(position_encoding=kind, max_length=16)
    table = ct2_export._positions(layer, config)
    assert table.shape == (rows, 8) and table.dtype == np.float32
    np.testing.assert_allclose(table, layer.encodings(0, rows).numpy())


def test_ctranslate2_greedy_search_with_a_target_prefix_equals_t2tlite(
    exported):
  """decode/prefix.py against CTranslate2's target_prefix: the same output
  after the same forced start."""
  model, vocab, path, _ = exported
  source, target, translator = _ctranslate2_of(path)
  search = tf.function(
      lambda ids, prefix: decode_ids(model, ids, target_prefix=prefix,
                                     beam_size=1, extra_length=EXTRA_LENGTH),
      input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2,
      autograph=False)
  prefix_pieces = target.encode("Ein Mann", out_type=str)
  prefix = [target.piece_to_id(p) for p in prefix_pieces]
  for line in multi30k_lines("en", 4):
    result = search(encode_inputs(vocab, tf.constant([line])),
                    tf.constant([prefix]))
    ids = result["outputs"][0].numpy().tolist()
    ids = ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids
    assert ids[:len(prefix)] == prefix
    tokens = source.encode(line, out_type=str)
    (ct2,) = translator.translate_batch(
        [tokens], target_prefix=[prefix_pieces], beam_size=1,
        length_penalty=0, max_decoding_length=len(tokens) + 1 + EXTRA_LENGTH,
        suppress_sequences=[["<pad>"]])
    assert [target.piece_to_id(p) for p in ct2.hypotheses[0]] == ids
