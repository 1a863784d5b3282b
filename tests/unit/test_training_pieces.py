"""Loss, schedule and optimizer of sections 5.3 and 5.4."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import t2tlite
from t2tlite.hparams_lib import HParams
from t2tlite.models import build_model
from t2tlite.train import budget
from t2tlite.train import train_step as train_step_lib
from t2tlite.train.config import TrainConfig
from t2tlite.train.fused_adam import FusedAdam
from t2tlite.train.losses import smoothed_cross_entropy, token_accuracy
from t2tlite.train.schedules import (NoamSchedule, build_optimizer,
                                     noam_learning_rate, set_train_steps)


def test_schedule_matches_eq3_at_key_steps():
  d_model, warmup = 512, 4000
  for step in (1, 4000, 100000):
    expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    got = float(noam_learning_rate(step, d_model, warmup))
    assert math.isclose(got, expected, rel_tol=1e-6), (step, got, expected)
  # Linear warm-up, then inverse square root: the peak is at warmup_steps.
  assert math.isclose(float(noam_learning_rate(4000, 512, 4000)),
                      512**-0.5 * 4000**-0.5, rel_tol=1e-6)
  assert math.isclose(float(noam_learning_rate(2, 512, 4000, scale=2.0)),
                      2 * 512**-0.5 * 2 * 4000**-1.5, rel_tol=1e-6)


def test_keras_schedule_uses_one_based_steps():
  schedule = NoamSchedule(512, 4000)
  # Optimizer iteration 0 is the first update: step_num 1.
  assert math.isclose(float(schedule(0)), float(noam_learning_rate(1, 512,
                                                                   4000)))
  assert math.isclose(float(schedule(3999)), 512**-0.5 * 4000**-0.5,
                      rel_tol=1e-6)
  assert NoamSchedule.from_config(schedule.get_config()).warmup_steps == 4000


def test_cooldown_scales_the_last_steps_down_linearly():
  schedule = NoamSchedule(64, 400, scale=0.25, train_steps=3000,
                          cooldown_steps=1000)
  plain = NoamSchedule(64, 400, scale=0.25)
  for iteration in (0, 399, 1999):  # before the cool-down: eq. (3)
    assert math.isclose(float(schedule(iteration)), float(plain(iteration)),
                        rel_tol=1e-6)
  # Step 2501 (iteration 2500) has 500 of the 1000 cool-down steps left.
  assert math.isclose(float(schedule(2500)), 0.5 * float(plain(2500)),
                      rel_tol=1e-5)
  assert math.isclose(float(schedule(2999)), 0.001 * float(plain(2999)),
                      rel_tol=1e-5)
  restored = NoamSchedule.from_config(schedule.get_config())
  assert (restored.train_steps, restored.cooldown_steps) == (3000, 1000)
  # A cool-down longer than the run covers the whole run.
  short = build_optimizer(t2tlite.create_hparams(
      "transformer_base", "train_steps=5,learning_rate_cooldown_steps=10"))
  schedule_config = short.get_config()["learning_rate"]["config"]
  assert schedule_config["cooldown_steps"] == 5


def test_a_traced_rate_follows_a_new_length():
  schedule = NoamSchedule(64, 400, train_steps=3000, cooldown_steps=1000)
  rate = tf.function(schedule, autograph=False)
  plain = NoamSchedule(64, 400)

  def ratio(iteration):  # of the traced rate to eq. (3)'s
    return float(rate(tf.constant(iteration))) / float(plain(iteration))

  assert ratio(2500) == pytest.approx(0.5, rel=1e-5)
  # A budget's plan: 2,000 steps, the last 500 cooled down.
  schedule.set_length(2000, 500)
  assert ratio(1750) == pytest.approx(0.5, rel=1e-5)
  assert ratio(999) == pytest.approx(1.0, rel=1e-6)
  schedule.set_length(2000, 0)  # no cool-down
  assert ratio(1999) == pytest.approx(1.0, rel=1e-6)
  assert rate.experimental_get_tracing_count() == 1
  # The saved config holds the new length too.
  config = schedule.get_config()
  assert (config["train_steps"], config["cooldown_steps"]) == (2000, 0)
  assert NoamSchedule.from_config(schedule.get_config()).get_config() == (
      schedule.get_config())


def test_optimizer_reads_hparams():
  hp = t2tlite.create_hparams(
      "transformer_base", "adam_beta1=0.8,adam_beta2=0.997,adam_epsilon=1e-6,"
      "learning_rate_scale=2,warmup_steps=100")
  optimizer = build_optimizer(hp)
  assert math.isclose(optimizer.beta_1, 0.8)
  assert math.isclose(optimizer.beta_2, 0.997)
  assert math.isclose(optimizer.epsilon, 1e-6)
  assert math.isclose(float(optimizer.learning_rate),
                      float(noam_learning_rate(1, 512, 100, scale=2.0)),
                      rel_tol=1e-6)


def test_a_new_run_length_caps_the_cooldown_at_it():
  """A plan of 5 steps with a 10-step cool-down cools all 5 (the first by
  5/5 = 1, the last by 1/5), not half of the rate from the first step."""
  optimizer = build_optimizer(t2tlite.create_hparams(
      "transformer_base",
      "warmup_steps=100,train_steps=1000,learning_rate_cooldown_steps=10"))
  set_train_steps(optimizer, 5, 10)
  schedule = optimizer.get_config()["learning_rate"]["config"]
  assert (schedule["train_steps"], schedule["cooldown_steps"]) == (5, 5)
  plain = NoamSchedule(512, 100)
  rate = optimizer._learning_rate
  assert float(rate(0)) == pytest.approx(float(plain(0)), rel=1e-6)
  assert float(rate(4)) == pytest.approx(float(plain(4)) / 5, rel=1e-5)
  with pytest.raises(TypeError, match="build_optimizer.s NoamSchedule"):
    set_train_steps(keras.optimizers.SGD(0.1), 5, 10)


def test_a_config_with_a_plan_does_not_plan_again(tmp_path):
  plan = budget.Plan(train_minutes=1.0, train_steps=40, planned_at_step=8,
                     planned_after_seconds=10.0, step_seconds=0.1,
                     eval_seconds=0.0, cooldown_steps=10)
  def config(**kwargs):
    return TrainConfig(output_dir=str(tmp_path), train_steps=10, **kwargs)
  assert config(train_minutes=1.0).planning
  assert not config(train_minutes=1.0, plan=plan).planning
  assert not config().planning


def test_config_refuses_an_unresolved_precision(tmp_path):
  # "auto" is the flag's; precision.choose resolves it before the config.
  for name in ("auto", "fp16"):
    with pytest.raises(ValueError, match=f"mixed_precision='{name}'"):
      TrainConfig(output_dir=str(tmp_path), train_steps=1,
                  mixed_precision=name)
  assert TrainConfig(output_dir=str(tmp_path), train_steps=1,
                     mixed_precision="float16").keras_policy == "mixed_float16"


def test_label_smoothing_against_hand_computation():
  # Vocabulary of 3; p = softmax([0, ln 2, 0]) = [1/4, 1/2, 1/4]; target 1.
  logits = tf.constant([[[0.0, math.log(2.0), 0.0], [5.0, 1.0, 2.0]]])
  targets = tf.constant([[1, 0]])  # the second position is padding
  eps = 0.1
  smoothed, nll, weights = smoothed_cross_entropy(logits, targets, eps)
  # q = (1 - eps) onehot + eps / 3.
  hand = -((1 - eps + eps / 3) * math.log(1 / 2) + 2 * (eps / 3) *
           math.log(1 / 4))
  np.testing.assert_allclose(smoothed.numpy(), [[hand, 0.0]], rtol=1e-6)
  np.testing.assert_allclose(nll.numpy(), [[math.log(2.0), 0.0]], rtol=1e-6)
  np.testing.assert_array_equal(weights.numpy(), [[1.0, 0.0]])
  # Without smoothing the loss is the NLL.
  plain, _, _ = smoothed_cross_entropy(logits, targets, 0.0)
  np.testing.assert_allclose(plain.numpy(), nll.numpy(), rtol=1e-6)


def test_loss_gradient_is_p_minus_q_on_real_tokens():
  # The hand-written gradient against the closed form: d loss / d logits =
  # w (p - q) for the smoothed loss and w (p - onehot) for the NLL, w the
  # weight of the position (0 on padding), over a [2, 3, 5] batch in which
  # both losses carry weight.
  rng = np.random.RandomState(0)
  logits = tf.constant(rng.randn(2, 3, 5).astype(np.float32) * 3)
  targets = tf.constant([[1, 4, 0], [2, 2, 3]])
  scale = tf.constant(rng.rand(2, 3).astype(np.float32))
  for eps in (0.0, 0.1):
    with tf.GradientTape() as tape:
      tape.watch(logits)
      smoothed, nll, _ = smoothed_cross_entropy(logits, targets, eps)
      total = tf.reduce_sum(scale * smoothed) + 0.5 * tf.reduce_sum(nll)
    got = tape.gradient(total, logits).numpy()
    p = tf.nn.softmax(logits).numpy()
    onehot = tf.one_hot(targets, 5).numpy()
    q = (1 - eps) * onehot + eps / 5
    w = (targets.numpy() != 0)[..., None]
    expected = w * (scale.numpy()[..., None] * (p - q) + 0.5 * (p - onehot))
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert np.all(got[0, 2] == 0.0)  # padding


def test_token_accuracy_ignores_padding():
  logits = tf.one_hot([[2, 1, 0, 0]], 3) * 5.0
  correct, weights = token_accuracy(logits, tf.constant([[2, 2, 1, 0]]))
  assert correct.numpy().sum() == 1.0 and weights.numpy().sum() == 3.0


def _traced_apply(optimizer, variables):
  """optimizer.apply_gradients on `variables`, as one tf.function of the
  gradients (the trainer's step is traced too)."""
  @tf.function(autograph=False)
  def apply(grads):
    optimizer.apply_gradients(zip(grads, variables))
  return apply


@pytest.mark.parametrize("amsgrad", [False, True])
def test_fused_adam_updates_as_keras_adam(amsgrad):
  """The fused kernel's update is Keras Adam's up to rounding, from the same
  optimizer variables (so checkpoints hold the same names); AMSGrad, which
  the kernel does not do, takes Keras's own update."""
  rng = np.random.default_rng(0)
  shapes = [(40, 7), (7,)]
  start = [rng.normal(size=s).astype("float32") for s in shapes]
  grads = [[rng.normal(size=s).astype("float32") for s in shapes]
           for _ in range(5)]
  results = {}
  for optimizer_class in (keras.optimizers.Adam, FusedAdam):
    variables = [keras.Variable(x, name=f"weight{i}")
                 for i, x in enumerate(start)]
    # Keras's Adam as the trainer's first optimizer in a process is named
    # (a later one without a name gets "adam_1"); FusedAdam's default.
    names = {"name": "adam"} if optimizer_class is keras.optimizers.Adam else {}
    optimizer = optimizer_class(learning_rate=1e-2, beta_1=0.9, beta_2=0.98,
                                epsilon=1e-9, amsgrad=amsgrad, **names)
    apply = _traced_apply(optimizer, variables)
    for step_grads in grads:
      apply([tf.constant(g) for g in step_grads])
    results[optimizer_class] = (
        [v.numpy() for v in variables],
        sorted(v.path for v in optimizer.variables))
  (keras_values, keras_names) = results[keras.optimizers.Adam]
  (fused_values, fused_names) = results[FusedAdam]
  assert fused_names == keras_names
  for keras_value, fused_value, first in zip(keras_values, fused_values, start):
    assert np.abs(fused_value - first).max() > 1e-2  # five steps moved it
    if amsgrad:  # the same ops: the same values
      np.testing.assert_array_equal(fused_value, keras_value)
    else:
      np.testing.assert_allclose(fused_value, keras_value, rtol=1e-5,
                                 atol=1e-6)


def test_the_trainer_gets_the_fused_adam_and_it_serializes():
  built = build_optimizer(t2tlite.create_hparams("transformer_tiny", ""))
  assert isinstance(built, FusedAdam)
  restored = keras.optimizers.deserialize(keras.optimizers.serialize(built))
  assert isinstance(restored, FusedAdam)
  assert restored.get_config() == built.get_config()


def _accumulated_step(loss_scale=False):
  """One TrainStep of 2 accumulated batches on a tiny model: (its outputs,
  the summed smoothed loss and the norm of the gradient of the per-token
  mean loss, both by hand, the optimizer)."""
  hp = HParams(num_layers=1, d_model=16, d_ff=32, num_heads=2, d_k=8, d_v=8,
               dropout=0.0, max_length=8, gradient_accumulation_steps=2)
  batches = [
      {"inputs": tf.constant([[5, 6, 7, 1], [8, 9, 1, 0]]),
       "targets": tf.constant([[7, 6, 1, 0], [9, 1, 0, 0]])},
      {"inputs": tf.constant([[4, 4, 5, 1], [3, 1, 0, 0]]),
       "targets": tf.constant([[5, 4, 1, 0], [0, 0, 0, 0]])}]
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  keras.utils.set_random_seed(1)
  with strategy.scope():
    model = build_model(hp, vocab_size=12)
    base = build_optimizer(hp)
    optimizer = (keras.optimizers.LossScaleOptimizer(base) if loss_scale
                 else base)
    optimizer.build(model.trainable_variables)
  train_step_lib.let_trainer_all_reduce(base)

  with tf.GradientTape() as tape:
    smoothed = [smoothed_cross_entropy(model(b, training=True), b["targets"],
                                       hp.label_smoothing)[0]
                for b in batches]
    total = tf.add_n([tf.reduce_sum(s) for s in smoothed])
    mean = total / 8.0
  grads = tape.gradient(mean, model.trainable_variables)
  expected_norm = float(tf.linalg.global_norm(grads))

  dataset = tf.data.Dataset.from_tensors(batches[0]).concatenate(
      tf.data.Dataset.from_tensors(batches[1]))
  iterator = iter(strategy.experimental_distribute_dataset(dataset))
  step = train_step_lib.TrainStep(model, optimizer, strategy, hp)
  out = {k: float(v) for k, v in step.function(iterator).items()}
  return out, float(total), expected_norm, optimizer


def test_an_accumulated_step_takes_the_mean_over_all_its_target_tokens():
  """The update of 2 accumulated batches is that of their per-token mean
  loss: the smoothed loss summed over both, divided by their real target
  tokens (5 + 3; the sources have more), differentiated by hand here."""
  out, total, expected_norm, optimizer = _accumulated_step()
  assert (out["target_tokens"], out["source_tokens"]) == (8.0, 13.0)
  assert out["loss"] == pytest.approx(total, rel=1e-5)
  assert out["grad_norm"] == pytest.approx(expected_norm, rel=1e-4)
  assert int(optimizer.iterations) == 1
  # The rate of the update made: eq. (3) at step 1 (d_model 16, warmup 4000).
  assert out["learning_rate"] == pytest.approx(16**-0.5 * 4000**-1.5,
                                               rel=1e-6)


def test_a_loss_scaled_step_logs_the_unscaled_gradient_norm():
  """float16's loss scaling multiplies the gradients by the loss scale
  (2^15 at the start); the logged norm is the true gradient's."""
  out, _, expected_norm, optimizer = _accumulated_step(loss_scale=True)
  assert float(optimizer.dynamic_scale) > 1000.0
  assert out["grad_norm"] == pytest.approx(expected_norm, rel=1e-4)
  assert int(optimizer.iterations) == 1
