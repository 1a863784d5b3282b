"""Builds a small "trained" run folder for decoding tests, without the trainer:
a real sentencepiece vocabulary trained on Multi30k lines, a tiny randomly
initialised Transformer, run_dir's hparams.json/run.json/vocab.model and one
checkpoint."""
import os

import pytest
import tensorflow as tf

from corpora import SHARED_DATA, read_lines

from t2tlite import run_dir
from t2tlite.data.vocab import Vocabulary, train_sentencepiece
from t2tlite.hparams_lib import HParams
from t2tlite.models import build_model

MULTI30K_RAW = SHARED_DATA / "multi30k" / "raw"
needs_multi30k = pytest.mark.skipif(not os.path.isdir(MULTI30K_RAW),
                                    reason="../shared/data/multi30k is absent")
TINY = HParams(num_layers=2, d_model=32, d_ff=64, num_heads=4, d_k=8, d_v=8,
               max_length=64)


def multi30k_lines(lang, count):
  """The first `count` lines of Multi30k train in `lang`."""
  return read_lines(MULTI30K_RAW / f"train.{lang}.gz", count)


def make_run_folder(folder, hp=TINY, problem="translate_ende_wmt",
                    checkpoint=True, seed=3, separate_target_vocab=False):
  """Writes a run folder; returns (model, vocab_path). With
  separate_target_vocab the targets get their own vocabulary (German
  lines, 250 pieces) and the inputs one of English lines."""
  os.makedirs(folder, exist_ok=True)
  texts = multi30k_lines("en", 300) + multi30k_lines("de", 300)
  target = {}
  if separate_target_vocab:
    texts = multi30k_lines("en", 300)
    target_path = os.path.join(folder, "target_vocab.model")
    target = dict(target_vocab_source=target_path,
                  target_vocab_size=train_sentencepiece(
                      lambda: iter(multi30k_lines("de", 300)), target_path,
                      250))
  vocab_path = os.path.join(folder, "source_vocab.model")
  vocab_size = train_sentencepiece(lambda: iter(texts), vocab_path, 300)
  tf.keras.utils.set_random_seed(seed)
  model = build_model(hp, vocab_size,
                      target_vocab_size=target.get("target_vocab_size"))
  run_dir.write_run_info(folder, hp, problem, vocab_size, vocab_path,
                         **target)
  if checkpoint:
    run_dir.make_checkpoint(model).save(os.path.join(folder, "ckpt"))
  return model, vocab_path


def trained_run(folder):
  """make_run_folder, then reload it as decoding does: (folder, model,
  Vocabulary)."""
  make_run_folder(folder)
  model, info, _ = run_dir.load_trained_model(folder)
  return folder, model, Vocabulary.from_file(info.vocab_file)
