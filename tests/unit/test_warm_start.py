"""Warm start (t2tlite.train.warm_start), in-process: the weights a child run
starts from, the variables a regex leaves fresh, the one-line errors, a
resumed run that ignores it, and embedding rows carried over by piece."""
import os
import random

import numpy as np
import pytest
import tensorflow as tf

import t2tlite
from t2tlite import run_dir
from t2tlite.data import vocab_source
from t2tlite.data.vocab import Vocabulary, train_sentencepiece
from t2tlite.train import warm_start
import permuted_vocab
import train_helpers

ONE_DEVICE = tf.distribute.OneDeviceStrategy("/cpu:0")


def _weights(model):
  return {name: v.numpy() for name, v in run_dir.model_variables(model).items()}


def _vocab(size=train_helpers.SYNTHETIC_VOCAB):
  return vocab_source.VocabSource(inputs=f"unused-{size}.model")


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
  """A tiny run trained 12 steps: (its folder, its trainer)."""
  folder = str(tmp_path_factory.mktemp("parent"))
  trainer = train_helpers.tiny_trainer(folder, ONE_DEVICE, train_steps=12,
                                       schedule="train")
  trainer.train()
  return folder, trainer


def _prepared(parent_folder, hparams="", variables=None):
  model = t2tlite.build_model(train_helpers.tiny_hparams(hparams),
                              train_helpers.SYNTHETIC_VOCAB)
  return warm_start.prepare(warm_start.parent_of(parent_folder, variables),
                            model, _vocab())


def test_child_starts_at_step_zero_with_the_parents_weights_and_evaluation(
    parent, tmp_path):
  folder, parent_trainer = parent
  prepared = _prepared(folder)
  assert prepared.parent.step == 12 and not prepared.fresh
  child = train_helpers.tiny_trainer(str(tmp_path / "child"), ONE_DEVICE,
                                     warm_start=prepared, train_steps=3)
  assert child.warm_started is prepared and child.step == 0
  ours, theirs = _weights(child.model), _weights(parent_trainer.model)
  assert ours.keys() == theirs.keys()
  for name, value in theirs.items():
    np.testing.assert_array_equal(ours[name], value, err_msg=name)
  # A fresh optimizer: no Adam moments, and the schedule's first rate.
  fresh = train_helpers.tiny_trainer(str(tmp_path / "fresh"), ONE_DEVICE)
  assert child.next_learning_rate() == fresh.next_learning_rate()
  assert child.next_learning_rate() != parent_trainer.next_learning_rate()
  before, after = child.evaluate(), parent_trainer.evaluate()
  assert before["step"] == 0 and after["step"] == 12
  assert before["loss"] == pytest.approx(after["loss"], rel=1e-6)
  assert before["accuracy"] == after["accuracy"]


def test_a_regex_reads_only_the_variables_it_matches(parent, tmp_path):
  folder, parent_trainer = parent
  prepared = _prepared(folder, variables="encoder")
  assert prepared.values and prepared.fresh
  assert all(name.startswith("encoder") for name in prepared.values)
  assert not any(name.startswith("encoder") for name in prepared.fresh)
  child = _weights(train_helpers.tiny_trainer(
      str(tmp_path / "child"), ONE_DEVICE, warm_start=prepared).model)
  line = prepared.describe()
  assert f"{len(prepared.values)} of {len(child)} variables loaded" in line
  assert (f"{len(prepared.fresh)} left at their initialisation "
          "(--warm_start_variables=encoder)") in line
  fresh = _weights(train_helpers.tiny_trainer(str(tmp_path / "fresh"),
                                              ONE_DEVICE).model)
  theirs = _weights(parent_trainer.model)
  for name in prepared.values:
    np.testing.assert_array_equal(child[name], theirs[name], err_msg=name)
  for name in prepared.fresh:
    np.testing.assert_array_equal(child[name], fresh[name], err_msg=name)
    assert not np.array_equal(child[name], theirs[name]), name


@pytest.mark.parametrize("hparams, variables, expected", [
    ("d_model=48,d_k=24,d_v=24", None,
     r"embedding/embeddings is \[20, 32\] there and \[20, 48\] in this model"),
    ("num_layers=2", None,
     r"this model's variable encoder_1/\S+ \[\d+(, \d+)*\] is not in that "
     r"checkpoint"),
    ("", "nothing_matches", r"warm_start_variables=nothing_matches: matches "
     "none of the model's variables"),
    # Matched from the start of a name (re.match): a part of names such as
    # encoder_0/self_attention/w_q selects nothing.
    ("", "self_attention", r"warm_start_variables=self_attention: matches "
     "none of the model's variables"),
    ("", "enc(", r"warm_start_variables=enc\(: not a regular expression"),
])
def test_what_does_not_fit_is_one_line_naming_both_sides(parent, hparams,
                                                          variables, expected):
  folder, _ = parent
  with pytest.raises(warm_start.WarmStartError, match=expected) as caught:
    _prepared(folder, hparams, variables)
  assert "\n" not in str(caught.value)
  if "there and" in expected or "not in that" in expected:
    assert os.path.join(folder, "ckpt-12") in str(caught.value)


def test_no_checkpoint_there(tmp_path):
  with pytest.raises(warm_start.WarmStartError,
                     match="warm_start_from=.*: no checkpoint in that folder"):
    warm_start.parent_of(str(tmp_path))
  with pytest.raises(warm_start.WarmStartError,
                     match="no such folder or checkpoint"):
    warm_start.parent_of(str(tmp_path / "ckpt-5"))


def test_mapped_rows_need_the_parents_vocabulary(tmp_path):
  # A checkpoint outside any run folder: no vocabulary to map rows from.
  checkpoint = str(tmp_path / "ckpt-3")
  parent = warm_start.Parent(checkpoint=checkpoint, step=3, vocab=None,
                             map_vocab=True)
  model = t2tlite.build_model(train_helpers.tiny_hparams(""),
                              train_helpers.SYNTHETIC_VOCAB)
  with pytest.raises(warm_start.WarmStartError) as caught:
    warm_start.prepare(parent, model, _vocab())
  assert str(caught.value) == (
      f"warm_start_from={checkpoint}: --warm_start_map_vocab needs the "
      "parent's vocabulary, and no run folder holds that checkpoint")


def test_a_checkpoint_prefix_names_that_checkpoint_not_the_newest(tmp_path):
  model = t2tlite.build_model(train_helpers.tiny_hparams(),
                              train_helpers.SYNTHETIC_VOCAB)
  checkpoint = run_dir.make_checkpoint(model)
  first = checkpoint.save(str(tmp_path / "ckpt"))
  newest = checkpoint.save(str(tmp_path / "ckpt"))
  assert (first, newest) == (str(tmp_path / "ckpt-1"),
                             str(tmp_path / "ckpt-2"))
  parent = warm_start.parent_of(first)
  assert (parent.checkpoint, parent.step) == (first, 1)
  assert parent.vocab is None  # no run folder holds it
  assert warm_start.parent_of(str(tmp_path)).checkpoint == newest


def test_a_run_that_resumes_ignores_the_warm_start(parent, tmp_path):
  folder, _ = parent
  child_dir = str(tmp_path / "child")
  first = train_helpers.tiny_trainer(child_dir, ONE_DEVICE)
  first.save()  # a checkpoint of the fresh weights, at step 0
  resumed = train_helpers.tiny_trainer(child_dir, ONE_DEVICE,
                                       warm_start=_prepared(folder))
  assert resumed.warm_started is None
  assert resumed.restored_from == os.path.join(child_dir, "ckpt-0")
  theirs = _weights(parent[1].model)
  for name, value in _weights(first.model).items():
    np.testing.assert_array_equal(_weights(resumed.model)[name], value)
    assert not np.array_equal(value, theirs[name]), name


# ---- vocabularies ------------------------------------------------------------

WORDS = ("a man in a blue shirt is riding a bike down the street while two "
         "dogs run beside him and a woman with a red hat watches").split()


def _texts():
  rng = random.Random(0)
  return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
          for _ in range(400)]


@pytest.fixture(scope="module")
def vocab_runs(tmp_path_factory):
  """A parent run folder on vocabulary A, and B: A's pieces under other ids.
  Returns (parent folder, parent model, path of A, path of B)."""
  root = tmp_path_factory.mktemp("vocab_runs")
  vocab_a, vocab_b = str(root / "a.model"), str(root / "b.model")
  size = train_sentencepiece(lambda: iter(_texts()), vocab_a, 60)
  permuted_vocab.permuted_copy(vocab_a, vocab_b)
  hp = train_helpers.tiny_hparams()
  tf.keras.utils.set_random_seed(5)
  model = t2tlite.build_model(hp, size)
  folder = str(root / "parent")
  run_dir.write_run_info(folder, hp, "translate_ende_wmt", size, vocab_a)
  run_dir.make_checkpoint(model).save(os.path.join(folder, "ckpt"))
  return folder, model, vocab_a, vocab_b


def test_another_vocabulary_is_an_error_naming_both_files(vocab_runs):
  folder, model, _, vocab_b = vocab_runs
  child = t2tlite.build_model(train_helpers.tiny_hparams(),
                              Vocabulary.from_file(vocab_b).size)
  with pytest.raises(warm_start.WarmStartError) as caught:
    warm_start.prepare(warm_start.parent_of(folder), child,
                       vocab_source.VocabSource(inputs=vocab_b))
  message = str(caught.value)
  assert "\n" not in message
  assert os.path.join(folder, "vocab.model") in message and vocab_b in message
  assert "--warm_start_map_vocab" in message


def test_a_shared_vocabulary_does_not_start_separate_ones(vocab_runs):
  folder, _, vocab_a, _ = vocab_runs
  child = t2tlite.build_model(train_helpers.tiny_hparams(),
                              Vocabulary.from_file(vocab_a).size)
  with pytest.raises(warm_start.WarmStartError,
                     match="the parent has one shared vocabulary .*, this "
                     "run separate input and target vocabularies") as caught:
    warm_start.prepare(warm_start.parent_of(folder), child,
                       vocab_source.VocabSource(inputs=vocab_a,
                                                targets=vocab_a))
  assert "\n" not in str(caught.value)


def test_the_parents_own_vocabulary_passes(vocab_runs):
  folder, model, vocab_a, _ = vocab_runs
  prepared = warm_start.prepare(
      warm_start.parent_of(folder),
      t2tlite.build_model(train_helpers.tiny_hparams(),
                          Vocabulary.from_file(vocab_a).size),
      vocab_source.VocabSource(inputs=vocab_a))
  assert not prepared.new_rows and not prepared.fresh


def test_mapped_rows_compute_what_the_parent_computes(vocab_runs):
  """With B's rows carried over by piece, the child's logits for a sentence
  are the parent's for the same sentence, piece by piece."""
  folder, parent_model, vocab_a, vocab_b = vocab_runs
  a, b = Vocabulary.from_file(vocab_a), Vocabulary.from_file(vocab_b)
  assert a.pieces() != b.pieces() and sorted(a.pieces()) == sorted(b.pieces())
  tf.keras.utils.set_random_seed(9)
  child = t2tlite.build_model(train_helpers.tiny_hparams(), b.size)
  prepared = warm_start.prepare(
      warm_start.parent_of(folder, map_vocab=True), child,
      vocab_source.VocabSource(inputs=vocab_b))
  assert prepared.new_rows == {"embedding/embeddings": 0}
  prepared.apply(child)
  sentences = ["a man in a blue shirt", "two dogs run beside the woman"]
  outputs = []
  for vocab, model in ((a, parent_model), (b, child)):
    ids = [vocab.encode_text(s) for s in sentences]
    width = max(map(len, ids))
    batch = tf.constant([row + [0] * (width - len(row)) for row in ids])
    logits = model({"inputs": batch, "targets": batch}, training=False)
    outputs.append((ids, logits.numpy()))
  (ids_a, logits_a), (ids_b, logits_b) = outputs
  assert [a.decode_ids(row) for row in ids_a] == [b.decode_ids(row)
                                                  for row in ids_b]
  assert ids_a != ids_b  # other ids for the same pieces
  # Column j of B's logits is the piece of A's column order[j].
  order = vocab_source.row_map(a.pieces(), b.pieces())
  np.testing.assert_allclose(logits_b, logits_a[..., order], rtol=1e-5,
                             atol=1e-5)
  # Not a constant function: the two sentences' logits differ.
  assert not np.allclose(logits_a[0, :3], logits_a[1, :3])


def test_row_map_marks_pieces_the_old_vocabulary_lacks():
  old = ["<pad>", "</s>", "<unk>", "a", "b", "c"]
  new = ["<pad>", "</s>", "<unk>", "c", "x", "a"]
  np.testing.assert_array_equal(vocab_source.row_map(old, new),
                                [0, 1, 2, 5, -1, 3])
  # PAD, EOS and UNK map to themselves whatever their pieces are called.
  np.testing.assert_array_equal(
      vocab_source.row_map(old, ["[PAD]", "[EOS]", "[UNK]", "b"]),
      [0, 1, 2, 4])


def test_new_pieces_keep_their_fresh_rows(vocab_runs, tmp_path):
  """A vocabulary with pieces the parent lacks: their rows keep the child's
  initialisation, the shared pieces' rows are the parent's."""
  folder, parent_model, vocab_a, _ = vocab_runs
  vocab_c = str(tmp_path / "c.model")
  texts = _texts() + ["zebra quartz jukebox vexing fjord"] * 50
  train_sentencepiece(lambda: iter(texts), vocab_c, 70)
  a, c = Vocabulary.from_file(vocab_a), Vocabulary.from_file(vocab_c)
  tf.keras.utils.set_random_seed(9)
  child = t2tlite.build_model(train_helpers.tiny_hparams(), c.size)
  initial = child.embedding.embeddings.numpy().copy()
  prepared = warm_start.prepare(
      warm_start.parent_of(folder, map_vocab=True), child,
      vocab_source.VocabSource(inputs=vocab_c))
  prepared.apply(child)
  rows = vocab_source.row_map(a.pieces(), c.pieces())
  new = rows < 0
  assert prepared.new_rows["embedding/embeddings"] == new.sum() > 0
  mapped = child.embedding.embeddings.numpy()
  np.testing.assert_array_equal(mapped[new], initial[new])
  np.testing.assert_array_equal(
      mapped[~new], parent_model.embedding.embeddings.numpy()[rows[~new]])


def test_a_bfloat16_run_starts_from_the_float32_weights(parent, tmp_path):
  """Mixed precision keeps float32 variables: the same values land."""
  folder, parent_trainer = parent
  child = train_helpers.tiny_trainer(str(tmp_path / "child"), ONE_DEVICE,
                                     warm_start=_prepared(folder),
                                     mixed_precision="bfloat16")
  assert child.model.compute_dtype == "bfloat16"
  for name, value in _weights(parent_trainer.model).items():
    np.testing.assert_array_equal(_weights(child.model)[name], value)
