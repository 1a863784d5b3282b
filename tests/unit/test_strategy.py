"""MirroredStrategy over 2 and 4 logical CPU devices trains like one device.

The global batch is the same in every configuration: 4 batches of 8 pairs per
step, taken as 1 device x 4 accumulated batches, 2 devices x 2, or 4 devices
x 1. The token-weighted loss makes the updates identical up to round-off.
Logical devices can only be set up before TensorFlow starts, so the three
configurations run in one process of their own, whose CPU `make_strategy`
splits into 4 devices: the 2-device and 1-device strategies take the first
of them.
"""
import json
import sys

import pytest

import train_helpers

SCRIPT = """
import json
import tensorflow as tf
from t2tlite.train import strategy as strategy_lib
strategies = {{4: strategy_lib.make_strategy(worker_gpu=4)}}
# A second strategy's collectives must not reuse the first's group keys
# (TensorFlow's own tests set this base for that).
tf.distribute.MirroredStrategy._collective_key_base = 1000
strategies[2] = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
strategies[1] = tf.distribute.OneDeviceStrategy("/cpu:0")
import train_helpers
results = {{}}
for devices, accumulate in {configurations!r}:
  strategy = strategies[devices]
  output_dir = {output_dir!r} + str(devices)
  # No final evaluation: the training summaries and weights are compared.
  trainer = train_helpers.tiny_trainer(
      output_dir, strategy, f"gradient_accumulation_steps={{accumulate}}",
      train_steps=8, schedule="train")
  trainer.train()
  results[devices] = {{
      "replicas": strategy.num_replicas_in_sync,
      "strategy": type(strategy).__name__,
      "scalars": train_helpers.read_scalars(output_dir),
      "weights": [float(abs(w.numpy()).sum()) for w in trainer.model.weights],
  }}
print(json.dumps(results))
"""

CONFIGURATIONS = ((1, 4), (2, 2), (4, 1))  # (devices, accumulated batches)


@pytest.mark.timeout(320)
def test_two_and_four_devices_match_one_device(tmp_path):
  script = SCRIPT.format(configurations=CONFIGURATIONS,
                         output_dir=str(tmp_path / "run"))
  code, output = train_helpers.run(
      [sys.executable, "-c", train_helpers.python_script(script)],
      timeout=300)
  assert code == 0, output[-5000:]
  results = {int(devices): result for devices, result in
             train_helpers.last_json_line(output).items()}

  assert results[1]["strategy"] == "OneDeviceStrategy"
  for devices in (2, 4):
    assert results[devices]["strategy"] == "MirroredStrategy"
    assert results[devices]["replicas"] == devices
  single = results[1]["scalars"]
  assert sorted(single["loss"], key=int) == [str(s) for s in range(1, 9)]
  for devices in (2, 4):
    multi = results[devices]["scalars"]
    for tag in ("loss", "nll", "grad_norm", "learning_rate"):
      for step, value in single[tag].items():
        assert multi[tag][step] == pytest.approx(value, rel=2e-3), (
            devices, tag, step)
    assert results[devices]["weights"] == pytest.approx(
        results[1]["weights"], rel=1e-3)
  # The loss went down: the runs really trained.
  losses = [single["loss"][str(s)] for s in range(1, 9)]
  assert losses[-1] < losses[0]


def test_cluster_workers_counts_chief_and_workers():
  from t2tlite.train import strategy as strategy_lib
  config = {"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"]},
            "task": {"type": "worker", "index": 0}}
  assert strategy_lib._cluster_workers(json.dumps(config)) == 3
  assert strategy_lib._cluster_workers("") == 0
  with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
    strategy_lib._cluster_workers("{not json")


def test_one_device_without_tf_config(monkeypatch):
  import tensorflow as tf
  from t2tlite.train import strategy as strategy_lib
  monkeypatch.delenv("TF_CONFIG", raising=False)
  strategy = strategy_lib.make_strategy(0)
  expected = (tf.distribute.MirroredStrategy
              if len(tf.config.list_physical_devices("GPU")) > 1 else
              tf.distribute.OneDeviceStrategy)
  assert isinstance(strategy, expected)
  assert strategy_lib.is_chief(strategy)
  assert strategy_lib.any_workers(strategy, True, False) == (True, False)
  with pytest.raises(ValueError, match="worker_gpu"):
    strategy_lib.make_strategy(-1)
  # A TF_CONFIG naming one worker is a single machine.
  single = {"cluster": {"worker": ["127.0.0.1:1"]},
            "task": {"type": "worker", "index": 0}}
  assert not strategy_lib.is_multi_worker(
      strategy_lib.make_strategy(0, json.dumps(single)))


def test_worker_timeout_must_be_positive():
  from t2tlite.train import strategy as strategy_lib
  with pytest.raises(ValueError, match="^worker_timeout_secs=0: expected a "
                     "positive number of seconds"):
    strategy_lib.make_strategy(0, tf_config="", worker_timeout_secs=0)


def test_tf_config_is_read_from_the_environment(monkeypatch):
  from t2tlite.train import strategy as strategy_lib
  monkeypatch.setenv("TF_CONFIG", "{not json")
  with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
    strategy_lib.make_strategy(0)
