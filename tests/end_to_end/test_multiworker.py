"""Two worker processes on 127.0.0.1 train together (MultiWorkerMirroredStrategy
from TF_CONFIG) and end with identical variables; only the chief writes the
output_dir; each leaves only once the other is done. A budgeted run plans one
length for both, and the chief's dev metric stops both early at the same
step."""
import json
import os
import re

import numpy as np
import pytest

from reverse_data import shared_reverse_data
import train_helpers
import worker_cluster

SCRIPT = """
import time
import numpy as np
from t2tlite.train import strategy as strategy_lib
strategy = strategy_lib.make_strategy()
import train_helpers
sigterm = [train_helpers.catches_sigterm()]
trainer = train_helpers.tiny_trainer({output_dir!r}, strategy, train_steps=6,
                                     local_eval_frequency=3,
                                     save_checkpoints_secs=0)
metrics = trainer.train()
sigterm.append(train_helpers.catches_sigterm())
np.savez({weights!r}, *[w.numpy() for w in trainer.model.weights])
chief = strategy_lib.is_chief(strategy)
print("chief" if chief else "worker",
      strategy_lib.is_multi_worker(strategy), strategy.num_replicas_in_sync,
      trainer.step,
      metrics["step"], "SIGTERM caught:", sigterm, flush=True)
# Each worker's own numbers in, the chief's out everywhere.
print("chief values", strategy_lib.chief_values(
    strategy, [1.5 if chief else 4.0, 7]), flush=True)
# leave_together, twice more after the trainer's: the chief slow, then the
# other worker, each arriving LEAVE_DELAY s after the last collective.
strategy_lib.any_workers(strategy, True)
for round_, slow in enumerate((True, False)):
  if slow == chief:
    time.sleep({delay})
  called = time.time()
  strategy_lib.leave_together(strategy)
  print("round", round_, "called", called, "returned", time.time(), flush=True)
"""
LEAVE_DELAY = 3.0


@pytest.mark.timeout(240)
def test_two_workers_end_with_identical_variables_and_leave_together(
    tmp_path):
  """Both workers train to the same variables; then each waits in
  leave_together until the other, arriving late, is done (TensorFlow's
  collectives pull data from the peer: a worker that exits right after its
  last collective can strand a slower peer in it)."""
  output_dir = tmp_path / "run"
  with train_helpers.processes() as started:
    worker_cluster.start_two_workers(
        started, tmp_path, lambda index: SCRIPT.format(
            output_dir=str(output_dir), delay=LEAVE_DELAY,
            weights=str(tmp_path / f"weights{index}.npz")))
    for index, proc in enumerate(started):
      proc.wait(timeout=220)
      output = (tmp_path / f"worker{index}.txt").read_text()
      assert proc.returncode == 0, output[-5000:]

  outputs = [(tmp_path / f"worker{i}.txt").read_text() for i in range(2)]
  # SIGTERM keeps its default action outside the training loop (TensorFlow's
  # runtime installs a handler that only records it).
  assert "chief True 2 6 6 SIGTERM caught: [False, False]" in outputs[0], (
      outputs[0][-3000:])
  assert "worker True 2 6 6 SIGTERM caught: [False, False]" in outputs[1], (
      outputs[1][-3000:])
  for output in outputs:
    assert "chief values (1.5, 7.0)" in output, output[-3000:]
  weights = [np.load(tmp_path / f"weights{i}.npz") for i in range(2)]
  assert len(weights[0].files) == len(weights[1].files) > 10
  for name in weights[0].files:
    np.testing.assert_array_equal(weights[0][name], weights[1][name])
  # The chief wrote the checkpoints and summaries; the other worker's private
  # checkpoint copies were deleted.
  assert train_helpers.latest_step(str(output_dir)) == 6
  assert not [n for n in os.listdir(output_dir) if n.startswith("worker_tmp")]
  assert json.loads((output_dir / "eval_results.json").read_text())[
      "step"] == 6
  times = [{int(r): (float(c), float(t)) for r, c, t in re.findall(
      r"round (\d) called (\S+) returned (\S+)", output)}
           for output in outputs]
  chief, worker = times
  # Round 0: the worker waited for the late chief; round 1, the reverse.
  for waiting, late, round_ in ((worker, chief, 0), (chief, worker, 1)):
    called, returned = waiting[round_]
    assert returned >= late[round_][0], times
    assert returned - called >= LEAVE_DELAY - 0.5, times


@pytest.mark.timeout(400)
def test_two_workers_share_the_plan_and_the_chiefs_early_stopping(
    tmp_path, tmp_path_factory):
  """A budgeted run of two workers: both plan the chief's length and stop
  early at its dev metric's say, keeping the best checkpoint through
  keep_checkpoint_max=1's pruning; a restart does not train further."""
  # A learning rate of ~0: the dev score never beats the first evaluation's
  # (the one that times the plan), so patience 2 stops at the second after,
  # long before the budget's end. The budget holds many evaluations even
  # when a loaded machine makes each take tens of seconds.
  data_dir = shared_reverse_data(tmp_path_factory)
  output_dir = tmp_path / "run"
  hparams = (f"{train_helpers.TINY_HPARAMS},batch_size=128,max_length=16,"
             "learning_rate_cooldown_steps=30,learning_rate_scale=1e-12")
  with train_helpers.processes() as started:
    procs, logs = worker_cluster.Cluster(tmp_path, started).start(
        data_dir, output_dir, f"--hparams={hparams}",
        "--schedule=train_and_evaluate", "--train_minutes=3",
        "--local_eval_frequency=5", "--eval_steps=1",
        "--eval_decode_samples=4", "--eval_decode_hparams=beam_size=1",
        "--early_stopping_patience=2",
        "--log_step_count_steps=10", "--keep_checkpoint_max=1",
        # Not a fault test: collectives that wait long on a loaded machine.
        "--worker_timeout_secs=60")
    for proc in procs:
      proc.wait(timeout=240)
  chief, worker = (log.read_text() for log in logs)
  for proc, output in zip(procs, (chief, worker)):
    assert proc.returncode == 0, output[-5000:]
  plan = json.loads((output_dir / "run.json").read_text())["plan"]
  # Both workers planned (and re-planned) the same length: the chief's.
  planned = [re.findall(r"(?:Re-)?[Pp]lanned (\d+) steps for "
                        r"--train_minutes=3", output)
             for output in (chief, worker)]
  assert planned[0] and planned[0] == planned[1], planned
  assert int(planned[0][-1]) == plan["train_steps"]
  # The chief decoded dev at each evaluation; both stopped at its third.
  records = [json.loads(line) for line in
             (output_dir / "metrics.jsonl").read_text().splitlines()]
  assert len(records) == 3 and all("exact_match" in r for r in records)
  stopped = records[-1]["step"]
  assert stopped < plan["train_steps"]
  assert (f"stopped early at step {stopped}: no better dev exact_match in 2 "
          "evaluations") in chief, chief[-3000:]
  assert f"Early stopping at step {stopped} (the chief's dev metric)" in \
      worker, worker[-3000:]
  assert "dev exact_match" not in worker
  best = records[0]["step"]
  assert json.loads((output_dir / "best" / "best.json").read_text())[
      "step"] == best
  assert train_helpers.latest_step(str(output_dir)) == stopped
  assert not [n for n in os.listdir(output_dir) if n.startswith("worker_tmp")]
  # The best checkpoint survives keep_checkpoint_max=1's pruning.
  assert (output_dir / "best" / f"ckpt-{best}.index").exists()
  assert [p.name for p in output_dir.glob("ckpt-*.index")] == [
      f"ckpt-{stopped}.index"]
  # A restart (one process: the run folder is the same) does not train
  # further: patience is counted from metrics.jsonl.
  code, output = train_helpers.run(
      [train_helpers.console_script("t2t-trainer"),
       f"--output_dir={output_dir}", "--early_stopping_patience=2",
       "--local_eval_frequency=5"], timeout=300)
  assert code == 0, output[-3000:]
  assert "not training further" in output, output[-3000:]
  assert len((output_dir / "metrics.jsonl").read_text().splitlines()) == 3
  assert train_helpers.latest_step(str(output_dir)) == stopped
