"""Two worker processes on 127.0.0.1 train together (MultiWorkerMirroredStrategy
from TF_CONFIG) and end with identical variables; only the chief writes the
output_dir."""
import json
import os
import sys

import numpy as np
import pytest

import train_helpers

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
  ports = train_helpers.free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
  with train_helpers.processes() as started:
    for index in range(2):
      tf_config = json.dumps({"cluster": cluster,
                              "task": {"type": "worker", "index": index}})
      script = SCRIPT.format(output_dir=str(output_dir),
                             weights=str(tmp_path / f"weights{index}.npz"))
      started.append(train_helpers.start(
          [sys.executable, "-c", train_helpers.python_script(script)],
          tmp_path / f"worker{index}.txt", env={"TF_CONFIG": tf_config}))
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
