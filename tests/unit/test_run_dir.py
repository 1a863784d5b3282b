"""A run folder as write_run_info leaves it and read_run_info reads it back,
its checkpoints (found by prefix or folder, newest first, damaged ones
named), and the runs an ensemble's members come from. The checkpoints hold
a single variable: finding and checking them reads no model."""
import os

import pytest
import tensorflow as tf

from t2tlite import run_dir
from t2tlite.hparams_lib import HParams

HP = HParams(num_layers=1, d_model=32, d_ff=64, num_heads=2, d_k=16, d_v=16)


def _vocab(folder, name="source.model", text="pieces of a vocabulary"):
  """A stand-in vocabulary file (write_run_info only copies it)."""
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, name)
  with open(path, "w") as f:
    f.write(text)
  return path


def _run(folder, problem="translate_ende_wmt", vocab_text="pieces", **kw):
  run_dir.write_run_info(folder, HP, problem, 20,
                         _vocab(folder + "_src", text=vocab_text), **kw)
  return folder


def _save(folder, steps):
  """Checkpoints ckpt-<step> of one variable in folder; their prefixes."""
  checkpoint = tf.train.Checkpoint(w=tf.Variable(tf.zeros([4])))
  manager = tf.train.CheckpointManager(checkpoint, folder, max_to_keep=None)
  return [manager.save(checkpoint_number=step) for step in steps]


def test_a_shared_vocabulary_is_read_back_as_shared(tmp_path):
  folder = _run(str(tmp_path / "run"))
  info = run_dir.read_run_info(folder)
  assert info.vocab_file == os.path.join(folder, "vocab.model")
  assert (info.vocab_size, info.target_vocab_size) == (20, 20)
  assert info.target_vocab_file == info.vocab_file
  assert info.shares_vocabulary and info.model_target_vocab_size is None
  with open(info.vocab_file) as f:
    assert f.read() == "pieces"


def test_a_target_vocabulary_of_its_own_is_read_back(tmp_path):
  folder = str(tmp_path / "run")
  targets = _vocab(str(tmp_path), "targets.model", "target pieces")
  _run(folder, target_vocab_size=30, target_vocab_source=targets)
  info = run_dir.read_run_info(folder)
  assert info.target_vocab_file == os.path.join(folder, "vocab.targets.model")
  assert (info.vocab_size, info.target_vocab_size) == (20, 30)
  assert not info.shares_vocabulary and info.model_target_vocab_size == 30
  with open(info.target_vocab_file) as f:
    assert f.read() == "target pieces"
  os.remove(info.target_vocab_file)
  with pytest.raises(FileNotFoundError, match="vocab.targets.model is "
                     "missing"):
    run_dir.read_run_info(folder)


def test_a_target_vocabulary_needs_both_its_size_and_its_file(tmp_path):
  targets = _vocab(str(tmp_path), "targets.model", "target pieces")
  for index, given in enumerate((dict(target_vocab_size=30),
                                 dict(target_vocab_source=targets))):
    folder = str(tmp_path / f"run{index}")
    with pytest.raises(ValueError, match="^write_run_info: give both "
                       "target_vocab_size and target_vocab_source, or "
                       "neither"):
      _run(folder, **given)
    assert not os.path.exists(folder)  # refused before writing


@pytest.mark.parametrize("name", ["hparams.json", "run.json", "vocab.model"])
def test_a_folder_missing_a_run_file_is_not_a_run(tmp_path, name):
  folder = _run(str(tmp_path / "run"))
  os.remove(os.path.join(folder, name))
  with pytest.raises(FileNotFoundError) as error:
    run_dir.read_run_info(folder)
  assert f"missing {os.path.join(folder, name)} (" in str(error.value)


def test_a_restart_keeps_the_recorded_plan_and_parent(tmp_path):
  parent = {"path": "/runs/base", "step": 100}
  folder = _run(str(tmp_path / "run"), parent=parent)
  run_dir.record_plan(folder, {"train_minutes": 4.0, "train_steps": 40})
  _run(folder)  # the restarted trainer writes its run files again
  assert run_dir.read_plan(folder) == {"train_minutes": 4.0,
                                       "train_steps": 40}
  assert run_dir.read_parent(folder) == parent


def test_checkpoint_path_names_a_prefix_or_a_folder(tmp_path):
  folder = str(tmp_path / "run")
  older, newer = _save(folder, [10, 20])
  assert run_dir.latest_checkpoint(folder) == newer
  assert run_dir.latest_checkpoint(folder, older) == older
  assert run_dir.latest_checkpoint(str(tmp_path), folder) == newer
  missing = os.path.join(folder, "ckpt-30")
  with pytest.raises(FileNotFoundError, match=f"checkpoint_path={missing}:"):
    run_dir.latest_checkpoint(folder, missing)
  with pytest.raises(FileNotFoundError, match="No checkpoint in output_dir="):
    run_dir.latest_checkpoint(str(tmp_path))


def test_checkpoints_newest_first_skips_deleted_ones(tmp_path):
  folder = str(tmp_path / "run")
  first, second, third = _save(folder, [1, 2, 3])
  assert run_dir.checkpoints_newest_first(folder) == [third, second, first]
  os.remove(third + ".index")
  assert run_dir.checkpoints_newest_first(folder) == [second, first]
  assert run_dir.checkpoints_newest_first(str(tmp_path)) == []


def test_ensemble_members_are_checked_against_their_own_runs(tmp_path):
  """A member's checkpoint under another run's averaged/ is that run's;
  runs of one problem and of vocabularies with the same bytes ensemble."""
  main = _run(str(tmp_path / "main"))
  main_ckpt, = _save(main, [5])
  same = _run(str(tmp_path / "same"))
  same_ckpt, = _save(os.path.join(same, "averaged"), [7])
  members = run_dir.resolve_members(main, [main, same_ckpt])
  assert [path for _, path in members] == [main_ckpt, same_ckpt]
  assert members[1][0].vocab_file == os.path.join(same, "vocab.model")

  other = _run(str(tmp_path / "other"), problem="translate_enfr_wmt")
  other_ckpt, = _save(os.path.join(other, "averaged"), [7])
  with pytest.raises(ValueError, match=f"{other_ckpt} was trained on "
                     "problem translate_enfr_wmt"):
    run_dir.resolve_members(main, [main, other_ckpt])
  vocab = _run(str(tmp_path / "vocab"), vocab_text="other pieces")
  vocab_ckpt, = _save(os.path.join(vocab, "best"), [7])
  with pytest.raises(ValueError, match=f"the vocabulary of {vocab_ckpt}"):
    run_dir.resolve_members(main, [main, vocab_ckpt])


def test_a_truncated_checkpoint_names_its_data_file(tmp_path):
  prefix, = _save(str(tmp_path), [3])
  data = prefix + ".data-00000-of-00001"
  with open(data, "r+b") as f:
    f.truncate(10)
  checkpoint = tf.train.Checkpoint(w=tf.Variable(tf.zeros([4])))
  with pytest.raises(run_dir.DamagedCheckpointError) as error:
    run_dir.restore(checkpoint, prefix)
  assert str(error.value).startswith(
      f"checkpoint {prefix} is damaged: {data} (10 bytes) cannot be read")
