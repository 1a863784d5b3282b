"""t2t-trainer's early stopping, and its one-line errors before any training
for runs that cannot evaluate or plan: no dev split, no metric."""
import json
import pathlib
import shutil

import pytest

from train_helpers import command, console_script, run

REPO = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = REPO / "tests" / "support" / "plugins"
TINY = ("num_layers=1,d_model=32,d_ff=64,num_heads=2,d_k=16,d_v=16,"
        "batch_size=256,warmup_steps=10,learning_rate_cooldown_steps=0")


@pytest.fixture(scope="module")
def reverse_data(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp("reverse") / "data"
  command("t2t-datagen", "--problem=algorithmic_reverse",
          f"--data_dir={data_dir}")
  return data_dir


def _trainer(*args, timeout=300):
  return run([console_script("t2t-trainer"), *args], timeout=timeout)


@pytest.mark.timeout(400)
def test_early_stopping_stops_after_patience(reverse_data, tmp_path):
  # A learning rate of ~0: the dev score never improves on the first one.
  output_dir = tmp_path / "train"
  code, output = _trainer(
      "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
      f"--hparams={TINY},learning_rate_scale=1e-12",
      f"--data_dir={reverse_data}", f"--output_dir={output_dir}",
      "--train_steps=1000", "--local_eval_frequency=5",
      "--eval_decode_samples=20", "--eval_steps=1",
      "--early_stopping_patience=2", "--mixed_precision=float32")
  assert code == 0, output[-3000:]
  records = [json.loads(line) for line in
             (output_dir / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in records] == [5, 10, 15]
  assert "stopped early at step 15: no better dev exact_match in 2 " \
         "evaluations" in output
  assert json.loads((output_dir / "best" / "best.json").read_text())[
      "step"] == 5
  # A restart does not train further: patience is counted from the log.
  code, output = _trainer(f"--output_dir={output_dir}",
                          "--early_stopping_patience=2",
                          "--local_eval_frequency=5")
  assert code == 0, output[-3000:]
  assert "not training further" in output
  assert len((output_dir / "metrics.jsonl").read_text().splitlines()) == 3


@pytest.mark.timeout(300)
def test_missing_dev_split_is_one_line_before_training(reverse_data,
                                                       tmp_path):
  data_dir = tmp_path / "data"
  shutil.copytree(reverse_data, data_dir)
  for path in data_dir.glob("*-dev*"):
    path.unlink()
  code, output = _trainer(
      "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
      f"--data_dir={data_dir}", f"--output_dir={tmp_path / 'train'}")
  assert code == 1, output[-3000:]
  assert "t2t-trainer: error: --schedule=train_and_evaluate evaluates on " \
         "dev, but" in output
  assert "Traceback" not in output
  assert not list((tmp_path / "train").glob("ckpt-*"))


@pytest.mark.timeout(300)
def test_metric_asked_of_a_problem_without_one(tmp_path):
  code, output = _trainer(
      f"--t2t_usr_dir={PLUGINS}", "--problem=plugin_sort_digits",
      "--hparams_set=plugin_tiny", f"--data_dir={tmp_path / 'data'}",
      f"--output_dir={tmp_path / 'train'}", "--generate_data",
      "--early_stopping_patience=3")
  assert code == 1, output[-3000:]
  assert ("t2t-trainer: error: problem plugin_sort_digits declares no dev "
          "metric") in output
  assert "Traceback" not in output
  assert not (tmp_path / "train").exists()
