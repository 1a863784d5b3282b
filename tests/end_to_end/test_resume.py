"""A t2t-trainer killed with SIGKILL mid-training resumes from its last
checkpoint with the right step and learning rate, and finishes; a restart with
conflicting hparams fails with a message."""
import json
import math
import os
import re
import signal

import pytest

import train_helpers
from worker_cluster import wait_until

TRAIN_STEPS = 500


def noam(step, hp):
  """Eq. (3) with the hparams' scale: the rate of update number `step`."""
  return hp["learning_rate_scale"] * hp["d_model"]**-0.5 * min(
      step**-0.5, step * hp["warmup_steps"]**-1.5)


def trainer_command(data_dir, output_dir, hparams=None):
  hparams = hparams or (train_helpers.TINY_HPARAMS +
                        ",batch_size=256,max_length=24")
  return [train_helpers.console_script("t2t-trainer"),
          "--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
          f"--hparams={hparams}", f"--data_dir={data_dir}",
          f"--output_dir={output_dir}", "--generate_data",
          f"--train_steps={TRAIN_STEPS}", "--save_checkpoints_secs=1",
          "--schedule=train", "--random_seed=3", "--log_step_count_steps=5"]


@pytest.mark.timeout(300)
def test_killed_run_resumes_and_finishes(tmp_path):
  data_dir, output_dir = tmp_path / "data", tmp_path / "train"
  command = trainer_command(data_dir, output_dir)
  with train_helpers.processes() as started:
    proc = train_helpers.start(command, tmp_path / "first.txt")
    started.append(proc)
    wait_until(lambda: (train_helpers.latest_step(str(output_dir)) or 0) >= 10,
               [tmp_path / "first.txt"], [proc], "a checkpoint at step 10",
               timeout=200)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
  first_log = (tmp_path / "first.txt").read_text()
  assert proc.returncode == -signal.SIGKILL
  killed_at = train_helpers.latest_step(str(output_dir))
  assert 10 <= killed_at < TRAIN_STEPS, first_log[-3000:]

  code, output = train_helpers.run(command, timeout=200)
  assert code == 0, output[-5000:]
  hp = json.loads((output_dir / "hparams.json").read_text())
  match = re.search(r"Resumed from (\S+)/ckpt-(\d+) at step (\d+) \(next "
                    r"learning rate ([0-9.e+-]+)\)", output)
  assert match, output[-5000:]
  resumed_at = int(match.group(2))
  # The newest checkpoint is the one on disk at the kill, or a later one that
  # was being written at that moment and completed (never a corrupt one).
  assert resumed_at >= killed_at and int(match.group(3)) == resumed_at
  assert float(match.group(4)) == pytest.approx(noam(resumed_at + 1, hp),
                                                rel=1e-3)
  progress = [int(s) for s in re.findall(r"step (\d+)/%d " % TRAIN_STEPS,
                                         output)]
  assert progress and min(progress) > resumed_at, output[-3000:]
  assert progress[-1] == TRAIN_STEPS
  # --log_step_count_steps=5: a progress line every 5 steps, and the last.
  assert all(step % 5 == 0 for step in progress[:-1]), progress
  assert train_helpers.latest_step(str(output_dir)) == TRAIN_STEPS

  # The learning rate logged at every step of both runs follows eq. (3) for
  # the global step (the schedule did not restart from 0).
  scalars = train_helpers.read_scalars(str(output_dir))
  assert set(scalars) >= {"loss", "nll", "learning_rate", "grad_norm",
                          "tokens_per_sec", "steps_per_sec"}
  for step, rate in scalars["learning_rate"].items():
    assert rate == pytest.approx(noam(step, hp), rel=1e-3), step
  assert all(math.isfinite(v) for v in scalars["loss"].values())

  # Restarting with other hparams fails at once, naming the difference.
  code, output = train_helpers.run(
      trainer_command(data_dir, output_dir,
                      train_helpers.TINY_HPARAMS + ",batch_size=512,"
                      "max_length=24"), timeout=120)
  assert code == 1, output[-3000:]
  assert "batch_size: saved 256, requested 512" in output, output[-3000:]
