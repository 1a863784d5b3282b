"""Checkpoint averaging gives the element-wise mean of the model variables,
of a run's newest checkpoints or of the best ones kept in OUTPUT_DIR/best."""
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import t2tlite
from t2tlite import run_dir
from t2tlite.train import averaging
from t2tlite.train import best as best_lib
from t2tlite.train.schedules import build_optimizer
from checkpoint_state import write_checkpoint_state
import command_flags
import train_helpers


@pytest.fixture(scope="module")
def three_checkpoints(tmp_path_factory):
  """(output_dir, {step: [weight values]}): a run dir with checkpoints at steps
  10, 20, 30 whose weights are random, saved as the trainer saves them."""
  output_dir = str(tmp_path_factory.mktemp("run"))
  hp = t2tlite.create_hparams(
      "transformer_tiny", train_helpers.TINY_HPARAMS + ",max_length=16")
  vocab = os.path.join(output_dir, "source.model")
  with open(vocab, "w") as f:
    f.write("not a real sentencepiece model; only copied")
  run_dir.write_run_info(output_dir, hp, "algorithmic_reverse", 20, vocab)
  model = t2tlite.build_model(hp, 20)
  optimizer = build_optimizer(hp)
  optimizer.build(model.trainable_variables)
  manager = tf.train.CheckpointManager(
      run_dir.make_checkpoint(model, optimizer), output_dir, max_to_keep=5)
  rng = np.random.RandomState(0)
  saved = {}
  for step in (10, 20, 30):
    for weight in model.weights:
      weight.assign(rng.normal(size=weight.shape).astype("float32"))
    saved[step] = [w.numpy() for w in model.weights]
    manager.save(checkpoint_number=step)
  return output_dir, saved


def test_average_of_three_checkpoints_is_the_elementwise_mean(
    three_checkpoints):
  output_dir, saved = three_checkpoints
  prefix = averaging.average_checkpoints(output_dir, 3)
  assert prefix == os.path.join(output_dir, "averaged", "ckpt-30")
  model, info, path = run_dir.load_trained_model(
      output_dir, checkpoint_path=os.path.join(output_dir, "averaged"))
  assert path == prefix and info.problem == "algorithmic_reverse"
  assert len(model.weights) == len(saved[10]) > 10
  for i, weight in enumerate(model.weights):
    expected = (saved[10][i] + saved[20][i] + saved[30][i]) / 3
    np.testing.assert_allclose(weight.numpy(), expected, rtol=1e-6,
                               atol=1e-6)


def test_too_few_checkpoints_is_an_error(three_checkpoints):
  output_dir, _ = three_checkpoints
  with pytest.raises(ValueError, match="keeps only 3 checkpoints"):
    averaging.average_checkpoints(output_dir, 5)
  with pytest.raises(FileNotFoundError, match="No checkpoint"):
    averaging.last_checkpoints(os.path.join(output_dir, "averaged", "none"),
                               1)


@pytest.mark.timeout(120)
def test_command_line_averages_the_last_two(three_checkpoints):
  output_dir, saved = three_checkpoints
  # A relative --output_dir, as typed by hand.
  parent, name = os.path.split(output_dir)
  code, output = train_helpers.run(
      [train_helpers.console_script("t2t-avg-checkpoints"),
       f"--output_dir={name}", "--n=2"], timeout=110, cwd=parent)
  assert code == 0, output[-3000:]
  prefix = output.strip().splitlines()[-1]
  assert prefix == os.path.join(name, "averaged", "ckpt-30")
  model, _, _ = run_dir.load_trained_model(
      output_dir, checkpoint_path=os.path.join(parent, prefix))
  for i, weight in enumerate(model.weights):
    np.testing.assert_allclose(weight.numpy(),
                               (saved[20][i] + saved[30][i]) / 2, rtol=1e-6,
                               atol=1e-6)


def test_averages_the_n_best_of_the_best_folder(three_checkpoints, tmp_path):
  output_dir, saved = three_checkpoints
  best_dir = os.path.join(output_dir, "best")
  for step, value in ((10, 3.0), (20, 1.0), (30, 2.0)):
    best_lib.keep_best(output_dir, os.path.join(output_dir, f"ckpt-{step}"),
                       step, "exact_match", value, {}, keep=2)
  # Numbered by the highest step averaged; the run folder's newest two
  # (20 and 30) are not the best two (10 and 30).
  prefix = averaging.average_checkpoints(
      output_dir, 2, averaged_dir=str(tmp_path), checkpoint_dir=best_dir)
  assert prefix == os.path.join(tmp_path, "ckpt-30")
  model, _, _ = run_dir.load_trained_model(output_dir, checkpoint_path=prefix)
  for i, weight in enumerate(model.weights):
    np.testing.assert_allclose(weight.numpy(),
                               (saved[10][i] + saved[30][i]) / 2, rtol=1e-6,
                               atol=1e-6)
  with pytest.raises(ValueError, match=(
      f"n=3 but {best_dir} keeps only 2 checkpoints .ckpt-30, ckpt-10.; use "
      "n=2, or train with a larger t2t-trainer --keep_best_checkpoints")):
    averaging.average_checkpoints(output_dir, 3, checkpoint_dir=best_dir)
  with pytest.raises(FileNotFoundError, match="not a folder"):
    averaging.average_checkpoints(output_dir, 1, checkpoint_dir=os.path.join(
        output_dir, "ckpt-30"))


@pytest.mark.parametrize("n", [0, -1])
def test_no_positive_number_of_checkpoints_is_an_error(tmp_path, n):
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path), max_to_keep=5)
  paths = [manager.save(checkpoint_number=step) for step in (10, 20, 30)]
  assert averaging.last_checkpoints(str(tmp_path), 3) == paths
  with pytest.raises(ValueError, match=f"n={n}: expected a positive number"):
    averaging.last_checkpoints(str(tmp_path), n)


def test_command_averages_the_folder_checkpoint_path_names(
    three_checkpoints, tmp_path, capsys):
  source, saved = three_checkpoints
  output_dir = str(tmp_path / "run")
  shutil.copytree(source, output_dir,
                  ignore=shutil.ignore_patterns("averaged", "best"))
  best_dir = os.path.join(output_dir, "best")
  for step, value in ((10, 3.0), (20, 1.0), (30, 2.0)):
    best_lib.keep_best(output_dir, os.path.join(output_dir, f"ckpt-{step}"),
                       step, "exact_match", value, {}, keep=2)
  with command_flags.command_module(
      "t2tlite.bin.t2t_avg_checkpoints", output_dir=output_dir, n=2,
      checkpoint_path=best_dir) as command:
    command._run()
  prefix = capsys.readouterr().out.strip()
  assert prefix == os.path.join(output_dir, "averaged", "ckpt-30")
  # The two best (10 and 30), not the newest two (20 and 30).
  model, _, _ = run_dir.load_trained_model(output_dir, checkpoint_path=prefix)
  for i, weight in enumerate(model.weights):
    np.testing.assert_allclose(weight.numpy(),
                               (saved[10][i] + saved[30][i]) / 2, rtol=1e-6,
                               atol=1e-6)


def test_too_few_in_a_run_folder_names_keep_checkpoint_max(tmp_path):
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path), max_to_keep=5)
  for step in (10, 20):
    manager.save(checkpoint_number=step)
  with pytest.raises(ValueError) as error:
    averaging.last_checkpoints(str(tmp_path), 3)
  assert str(error.value) == (
      f"n=3 but {tmp_path} keeps only 2 checkpoints (ckpt-10, ckpt-20); use "
      "n=2, or train with a larger t2t-trainer --keep_checkpoint_max.")


def test_checkpoints_of_another_model_are_not_averaged(three_checkpoints,
                                                       tmp_path):
  output_dir, _ = three_checkpoints
  other = str(tmp_path / "other")
  tf.train.CheckpointManager(
      tf.train.Checkpoint(v=tf.Variable(1.0)), other, max_to_keep=1).save(
          checkpoint_number=40)
  averaged = tmp_path / "averaged"
  with pytest.raises(ValueError) as error:
    averaging.average_checkpoints(output_dir, 1, averaged_dir=str(averaged),
                                  checkpoint_dir=other)
  # One line (t2t-avg-checkpoints prints it), naming the checkpoint.
  assert str(error.value).startswith(
      f"{other}/ckpt-40: its variables are not this run's model's (")
  assert "\n" not in str(error.value)
  assert not averaged.exists()


def test_a_later_average_keeps_the_earlier_one(three_checkpoints, tmp_path):
  output_dir, _ = three_checkpoints
  # A folder whose 'checkpoint' file lists the run's two oldest.
  older = tmp_path / "older"
  older.mkdir()
  write_checkpoint_state(older, [f"{output_dir}/ckpt-{step}"
                                 for step in (10, 20)])
  averaged = str(tmp_path / "averaged")
  first = averaging.average_checkpoints(output_dir, 2, averaged_dir=averaged,
                                        checkpoint_dir=str(older))
  second = averaging.average_checkpoints(output_dir, 1, averaged_dir=averaged)
  assert (first, second) == (os.path.join(averaged, "ckpt-20"),
                             os.path.join(averaged, "ckpt-30"))
  assert tf.train.get_checkpoint_state(
      averaged).all_model_checkpoint_paths == [first, second]
  assert os.path.exists(first + ".index")


def test_command_averages_the_newest_five_unless_told(three_checkpoints):
  output_dir, _ = three_checkpoints
  with command_flags.command_module(
      "t2tlite.bin.t2t_avg_checkpoints", output_dir=output_dir) as command:
    with pytest.raises(ValueError, match=f"n=5 but {output_dir} keeps only "
                       "3 checkpoints"):
      command._run()
