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


def _cluster_strategy(cluster, task_type, task_id):
  """A multi-worker strategy's view of its cluster, without its runtime
  (which would wait for the peers to start)."""
  import tensorflow as tf

  class ClusterStrategy(tf.distribute.MultiWorkerMirroredStrategy):

    def __init__(self, resolver):  # pylint: disable=super-init-not-called
      self._resolver = resolver

    @property
    def cluster_resolver(self):
      return self._resolver

  return ClusterStrategy(tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id))


def test_worker_gpu_1_without_gpus_is_the_cpu_itself():
  """One device needs no split CPU: it works after TensorFlow started."""
  import tensorflow as tf
  from t2tlite.train import strategy as strategy_lib
  if tf.config.list_physical_devices("GPU"):
    pytest.skip("a machine with GPUs uses the first one")
  tf.config.list_logical_devices()  # starts the runtime
  strategy = strategy_lib.make_strategy(1, tf_config="")
  assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
  assert strategy.extended.worker_devices[0].endswith("CPU:0")


def test_coordination_service_led_by_the_chief_outlasts_collectives(
    monkeypatch):
  """The service's heartbeat timeout is longer than a collective's, so
  that a frozen peer is reported by the trainer first. (The service is
  configured, and the strategy made, only with every peer running.)"""
  from tensorflow.python.eager import context
  from t2tlite.train import strategy as strategy_lib

  class Configured(Exception):
    pass

  settings = {}

  def configure(**kwargs):
    settings.update(kwargs)
    raise Configured

  monkeypatch.setattr(context.context(), "configure_coordination_service",
                      configure)
  cluster = {"chief": ["a:1"], "worker": ["b:1", "c:1"]}
  config = {"cluster": cluster, "task": {"type": "worker", "index": 1}}
  with pytest.raises(Configured):
    strategy_lib.make_strategy(0, json.dumps(config), worker_timeout_secs=10)
  assert settings["service_leader"] == "/job:chief/replica:0/task:0"
  collective_ms = 1000 * strategy_lib.collective_timeout_secs(10)
  assert collective_ms < settings["heartbeat_timeout_in_ms"] < 3600 * 1000
  assert settings["shutdown_barrier_timeout_in_ms"] == 10 * 1000
  assert [(job.name, job.num_tasks) for job in
          settings["coordinated_jobs"]] == [("chief", 1), ("worker", 2)]
  del cluster["chief"]
  with pytest.raises(Configured):
    strategy_lib.make_strategy(0, json.dumps(config))
  assert settings["service_leader"] == "/job:worker/replica:0/task:0"


def test_the_chief_task_is_chief_or_else_worker_0():
  from t2tlite.train import strategy as strategy_lib
  with_chief = {"chief": ["a:1"], "worker": ["b:1", "c:1"]}
  workers = {"worker": ["b:1", "c:1"]}
  for cluster, task_type, task_id, chief in (
      (with_chief, "chief", 0, True), (with_chief, "worker", 0, False),
      (with_chief, "worker", 1, False), (workers, "worker", 0, True),
      (workers, "worker", 1, False)):
    strategy = _cluster_strategy(cluster, task_type, task_id)
    assert strategy_lib.is_chief(strategy) == chief, (task_type, task_id)
    assert strategy_lib.task_id(strategy) == task_id


def test_peers_are_the_other_chief_and_worker_tasks():
  from t2tlite.train import strategy as strategy_lib
  cluster = {"chief": ["a:1"], "worker": ["b:2", "c:3"], "ps": ["d:4"]}
  strategy = _cluster_strategy(cluster, "worker", 0)
  assert strategy_lib.task_name(strategy) == "/job:worker/task:0"
  assert strategy_lib.peer_addresses(strategy) == {
      "/job:chief/task:0": "a:1", "/job:worker/task:1": "c:3"}
  assert strategy_lib.peer_names(
      _cluster_strategy(cluster, "chief", 0)) == [
          "/job:worker/task:0", "/job:worker/task:1"]


def test_a_failed_probe_is_refused_only_where_nothing_listens():
  """Outside a cluster TensorFlow's probe fails at once, as it does for a
  killed peer; the address then tells refused (nothing listens) from
  silent (the kernel accepts: a frozen peer)."""
  import socket
  from t2tlite.train import peer_watch
  from t2tlite.train import strategy as strategy_lib
  with socket.socket() as closed, socket.socket() as listening:
    closed.bind(("127.0.0.1", 0))
    listening.bind(("127.0.0.1", 0))
    listening.listen(8)
    addresses = {"/job:worker/task:1": "127.0.0.1:%d" % closed.getsockname()[1],
                 "/job:worker/task:2":
                     "127.0.0.1:%d" % listening.getsockname()[1]}
    peers = ["/job:worker/task:2", "/job:worker/task:1"]
    assert strategy_lib.probe_peers(peers, 1.0, addresses) == [
        peer_watch.SILENT, peer_watch.REFUSED]
    cluster = {"worker": ["127.0.0.1:1"] + list(addresses.values())}
    assert strategy_lib.unanswered_peers(
        _cluster_strategy(cluster, "worker", 0), timeout_secs=1.0) == {
            "/job:worker/task:1": peer_watch.REFUSED,
            "/job:worker/task:2": peer_watch.SILENT}


def test_chief_values_hold_where_workers_have_other_device_counts():
  """chief_values' collective adds each replica's share: a chief of three
  devices and a worker of two still give the chief's own values."""
  import numpy as np
  from t2tlite.train import strategy as strategy_lib
  shares = ([strategy_lib._chief_share([7, 0.5], True)] * 3 +
            [strategy_lib._chief_share([9, 9], False)] * 2)
  sums = np.sum(np.array(shares, np.float32), axis=0)
  assert strategy_lib._chief_from_sums(sums) == (7.0, 0.5)
