"""One training step under MirroredStrategy over 2 logical CPU devices gives
the same update as one device on the same global batch.

Plain SGD with rate 1 makes the update equal to the all-reduced gradient; Adam's
first step is about lr * sign(gradient), which would turn round-off on
near-zero gradients into full-size differences.
"""
import json
import subprocess
import sys
import textwrap

import pytest

import train_helpers

SCRIPT = train_helpers.LEAN_START + textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras, numpy as np, t2tlite
    from t2tlite.train.losses import smoothed_cross_entropy

    hp = t2tlite.create_hparams("transformer_tiny",
                                "dropout=0.0,num_layers=1,d_model=32,d_ff=64")
    rng = np.random.RandomState(0)
    inputs = rng.randint(2, 30, size=(4, 7)).astype("int32")
    targets = rng.randint(2, 30, size=(4, 5)).astype("int32")
    targets[1, 3:] = 0  # padding, so replicas hold different token counts
    total_tokens = float((targets != 0).sum())

    def train_once(strategy):
      with strategy.scope():
        keras.utils.set_random_seed(7)
        model = t2tlite.build_model(hp, 32)
        optimizer = keras.optimizers.SGD(learning_rate=1.0)
        optimizer.build(model.trainable_variables)
      before = [v.numpy() for v in model.trainable_variables]

      def step(features):
        with tf.GradientTape() as tape:
          logits = model(features, training=True)
          loss, _, _ = smoothed_cross_entropy(logits, features["targets"],
                                              hp.label_smoothing)
          # Normalise by the global token count, so replicas sum to the mean.
          loss = tf.reduce_sum(loss) / total_tokens
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

      dataset = tf.data.Dataset.from_tensor_slices(
          {"inputs": inputs, "targets": targets}).batch(4)
      batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
      losses = strategy.run(step, args=(batch,))
      loss = strategy.reduce("SUM", losses, axis=None)
      after = [v.numpy() for v in model.trainable_variables]
      moved = max(float(np.abs(a - b).max()) for a, b in zip(before, after))
      return float(loss), after, moved

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    loss2, vars2, moved = train_once(mirrored)
    loss1, vars1, _ = train_once(tf.distribute.OneDeviceStrategy("/cpu:0"))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(vars1, vars2))
    print(json.dumps({"replicas": mirrored.num_replicas_in_sync,
                      "loss1": loss1, "loss2": loss2, "diff": diff,
                      "moved": moved}))
""")


@pytest.mark.timeout(240)
def test_one_step_on_two_logical_devices_matches_one_device():
  result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True,
                          text=True, timeout=220)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  assert report["replicas"] == 2
  assert abs(report["loss1"] - report["loss2"]) < 1e-5
  assert report["moved"] > 1e-3  # the step really updated the weights
  assert report["diff"] < 1e-5
