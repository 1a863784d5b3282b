"""Two worker processes on 127.0.0.1 train together (MultiWorkerMirroredStrategy
from TF_CONFIG) and end with identical variables; only the chief writes the
output_dir. A budgeted run plans one length for both, and the chief's dev
metric stops both early at the same step."""
import json
import os
import re
import sys

import numpy as np
import pytest

import train_helpers
import worker_cluster

SCRIPT = """
import os
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
print("chief" if strategy_lib.is_chief(strategy) else "worker",
      strategy_lib.is_multi_worker(strategy), strategy.num_replicas_in_sync,
      trainer.step,
      metrics["step"], "SIGTERM caught:", sigterm)
"""


@pytest.mark.timeout(240)
def test_two_workers_end_with_identical_variables(tmp_path):
  output_dir = tmp_path / "run"
  with train_helpers.processes() as started:
    worker_cluster.start_two_workers(
        started, tmp_path, lambda index: SCRIPT.format(
            output_dir=str(output_dir),
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


@pytest.mark.timeout(300)
def test_two_workers_share_the_plan_and_the_chiefs_early_stopping(tmp_path):
  # A learning rate of ~0: the dev score never beats the first evaluation's
  # (the one that times the plan), so patience 2 stops at the second after,
  # long before the budget's end.
  data_dir, output_dir = tmp_path / "data", tmp_path / "run"
  hparams = (f"{train_helpers.TINY_HPARAMS},batch_size=128,max_length=16,"
             "learning_rate_cooldown_steps=30,learning_rate_scale=1e-12")
  with train_helpers.processes() as started:
    procs, logs = worker_cluster.Cluster(tmp_path, started).start(
        data_dir, output_dir, f"--hparams={hparams}",
        "--schedule=train_and_evaluate", "--train_minutes=2",
        "--local_eval_frequency=5", "--eval_steps=1",
        "--eval_decode_samples=10", "--early_stopping_patience=2",
        "--log_step_count_steps=10", "--mixed_precision=float32")
    for proc in procs:
      proc.wait(timeout=240)
  chief, worker = (log.read_text() for log in logs)
  for proc, output in zip(procs, (chief, worker)):
    assert proc.returncode == 0, output[-5000:]
  plan = json.loads((output_dir / "run.json").read_text())["plan"]
  # Both workers planned (and re-planned) the same length: the chief's.
  planned = [re.findall(r"(?:Re-)?[Pp]lanned (\d+) steps for "
                        r"--train_minutes=2", output)
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
  assert json.loads((output_dir / "best" / "best.json").read_text())[
      "step"] == records[0]["step"]
  assert train_helpers.latest_step(str(output_dir)) == stopped
  assert not [n for n in os.listdir(output_dir) if n.startswith("worker_tmp")]


LEAVE_SCRIPT = """
import time
from t2tlite.train import strategy as strategy_lib
strategy = strategy_lib.make_strategy(worker_timeout_secs=30)
strategy_lib.any_workers(strategy, True)  # a last collective
chief = strategy_lib.is_chief(strategy)
for round_, slow in enumerate((True, False)):  # the chief slow, then the other
  if slow == chief:
    time.sleep({delay})
  called = time.time()
  strategy_lib.leave_together(strategy)
  print("round", round_, "called", called, "returned", time.time(), flush=True)
"""


@pytest.mark.timeout(240)
def test_leave_together_waits_for_the_slower_worker(tmp_path):
  # TensorFlow's collectives pull data from the peer: a worker that exits
  # right after its last collective can strand a slower peer in it, so each
  # waits in leave_together until the other is done (the chief, then the
  # other worker, arriving 3 s late).
  delay = 3.0
  ports = train_helpers.free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
  logs = [tmp_path / f"worker{index}.txt" for index in range(2)]
  with train_helpers.processes() as started:
    for index in range(2):
      tf_config = json.dumps({"cluster": cluster,
                              "task": {"type": "worker", "index": index}})
      started.append(train_helpers.start(
          [sys.executable, "-c",
           train_helpers.python_script(LEAVE_SCRIPT.format(delay=delay))],
          logs[index], env={"TF_CONFIG": tf_config}))
    for proc, log in zip(started, logs):
      proc.wait(timeout=200)
      assert proc.returncode == 0, log.read_text()[-5000:]
  times = [{int(r): (float(c), float(t)) for r, c, t in re.findall(
      r"round (\d) called (\S+) returned (\S+)", log.read_text())}
           for log in logs]
  chief, worker = times
  # Round 0: the worker waited for the late chief; round 1, the reverse.
  for waiting, late, round_ in ((worker, chief, 0), (chief, worker, 1)):
    called, returned = waiting[round_]
    assert returned >= late[round_][0], times
    assert returned - called >= delay - 0.5, times
