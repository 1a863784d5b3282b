"""One optimizer update ("step"), distributed.

Each replica takes `gradient_accumulation_steps` batches of at most
`batch_size` padded tokens, sums the label-smoothed cross-entropy of their
real target tokens and divides by the number of real target tokens in the
whole step (all replicas, all accumulated batches); the gradients are summed
over the accumulated batches and all-reduced (summed) over replicas. So the
update is that of one big batch's per-token mean loss, whatever the split
into replicas and accumulation steps.
"""
import keras
import tensorflow as tf

from t2tlite.train.losses import smoothed_cross_entropy

SUM = tf.distribute.ReduceOp.SUM
_MEAN = tf.distribute.ReduceOp.MEAN


def _dense(grad, variable):
  if grad is None:
    return tf.zeros_like(variable)
  return tf.convert_to_tensor(grad)


def sum_dicts(a, b):
  """{key: a[key] + b[key]} (the same keys in both)."""
  return {k: a[k] + b[k] for k in a}


def let_trainer_all_reduce(optimizer):
  """Stops a Keras 3 optimizer from all-reducing gradients itself.

  The trainer all-reduces them before `apply_gradients` (to log the global
  gradient norm, and so that a float16 LossScaleOptimizer checks the same
  gradients on every replica). Keras 3 has no `experimental_aggregate_
  gradients=False` (keras-team/keras#19308), so the TF backend's summing hook
  is replaced on this instance by the identity.
  """
  if not hasattr(optimizer, "_all_reduce_sum_gradients"):
    raise RuntimeError("This Keras version's optimizer has no "
                       "_all_reduce_sum_gradients; the trainer needs updating.")
  optimizer._all_reduce_sum_gradients = lambda grads_and_vars: grads_and_vars


class TrainStep:
  """The training step as a tf.function (`function`), on the replicas of
  `strategy`.

  Args:
    model: the Keras model, built in strategy.scope().
    optimizer: the optimizer that applies the gradients (a
      LossScaleOptimizer in float16), through `let_trainer_all_reduce`.
    strategy: a tf.distribute.Strategy.
    hp: HParams; their label_smoothing and gradient_accumulation_steps.
    xla: compile the per-replica forward and backward pass with XLA.
  """

  def __init__(self, model, optimizer, strategy, hp, xla=False):
    self.model, self.optimizer, self.strategy, self.hp = (
        model, optimizer, strategy, hp)
    # Without AutoGraph (the loops are over Python lists and ranges):
    # converting the model's Python code took seconds at every start.
    self._micro_step = tf.function(self._micro_step_fn,
                                   jit_compile=xla, autograph=False)
    # `function(iterator)`: one optimizer update on the next batches of a
    # distributed iterator; {"loss", "nll" (sums over the step's real target
    # tokens), "target_tokens", "source_tokens", "grad_norm",
    # "learning_rate"}: float32 scalar tensors.
    self.function = tf.function(self._train_step_fn, autograph=False)

  def _micro_step_fn(self, batch, denominator):
    """Gradients of one batch's share of the step loss (per replica).

    Args:
      batch: {"inputs": int32 [batch, src_len], "targets": int32 [batch,
        tgt_len]}, 0 = padding.
      denominator: float32 []: the real target tokens of the whole step
        (every replica, every accumulated batch).
    Returns:
      (grads: one dense tensor per trainable variable, of its shape;
      sums: {"loss", "nll", "target_tokens", "source_tokens"}: float32 []
      sums over the batch's real tokens).
    """
    targets = batch["targets"]
    with tf.GradientTape() as tape:
      logits = self.model(batch, training=True)
      smoothed, nll, weights = smoothed_cross_entropy(
          logits, targets, self.hp.label_smoothing)
      loss = tf.reduce_sum(smoothed) / denominator
      if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
        loss = self.optimizer.scale_loss(loss)
    variables = self.model.trainable_variables
    grads = [_dense(g, v) for g, v in
             zip(tape.gradient(loss, variables), variables)]
    sums = {"loss": tf.reduce_sum(smoothed), "nll": tf.reduce_sum(nll),
            "target_tokens": tf.reduce_sum(weights),
            "source_tokens": tf.reduce_sum(
                tf.cast(batch["inputs"] != 0, tf.float32))}
    return grads, sums

  def _replica_train_step(self, batches):
    """One replica's part of the update: the gradients of its `batches` (a
    tuple of gradient_accumulation_steps batches, each as in
    `_micro_step_fn`), summed, all-reduced and applied.

    Returns:
      (sums: as `_micro_step_fn`'s, over `batches`; {"grad_norm",
      "learning_rate"}: float32 [], the same on every replica).
    """
    context = tf.distribute.get_replica_context()
    local_tokens = tf.add_n([tf.reduce_sum(tf.cast(b["targets"] != 0,
                                                   tf.float32))
                             for b in batches])
    denominator = tf.maximum(context.all_reduce(SUM, local_tokens), 1.0)
    learning_rate = tf.cast(self.optimizer.learning_rate, tf.float32)
    grads = sums = None
    for batch in batches:
      if grads is not None:  # one batch at a time: bounded activation memory
        with tf.control_dependencies(grads):
          batch = tf.nest.map_structure(tf.identity, batch)
      batch_grads, batch_sums = self._micro_step(batch, denominator)
      grads = batch_grads if grads is None else [
          a + b for a, b in zip(grads, batch_grads)]
      sums = batch_sums if sums is None else sum_dicts(sums, batch_sums)
    grads = context.all_reduce(SUM, grads)
    grad_norm = tf.linalg.global_norm(grads)
    if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
      grad_norm /= tf.cast(self.optimizer.dynamic_scale, tf.float32)
    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
    return sums, {"grad_norm": grad_norm, "learning_rate": learning_rate}

  def _train_step_fn(self, iterator):
    """`function`'s body: the replicas' sums added up; grad_norm and
    learning_rate, the same on every replica, as they are (their mean)."""
    batches = tuple(next(iterator)
                    for _ in range(self.hp.gradient_accumulation_steps))
    sums, same = self.strategy.run(self._replica_train_step, args=(batches,))
    out = {k: self.strategy.reduce(SUM, v, axis=None) for k, v in sums.items()}
    out.update({k: self.strategy.reduce(_MEAN, v, axis=None)
                for k, v in same.items()})
    return out
