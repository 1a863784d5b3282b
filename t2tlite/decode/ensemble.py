"""Ensemble decoding: several trained models of one problem and vocabulary
searched as one model.

    models, info, paths = run_dir.load_models(
        output_dir, ["run_a", "run_b/ckpt-900"])
    decoder = Decoder(Ensemble(models), vocab, machine.settle(hp),
                      target_vocab)

At every step of the search each model reads the same prefix with its own
cache and the ensemble's next-token log-probabilities are the mean of the
models' (the search renormalizes them: a normalized geometric mean of the
distributions). An ensemble of one model, or of a model with itself, is
that model. The models may differ in architecture (layers, sizes); they
must share the problem and the vocabularies, which `run_dir.load_models` checks.
"""
import dataclasses

import tensorflow as tf

from t2tlite.layers.search_weights import EnsembleWeights


class Ensemble:
  """Models with the interface `search.decode` searches with
  (`config`, `search_weights`, `prepare_decoding`).

  Args:
    models: Transformers of the same target vocabulary.
  """

  def __init__(self, models):
    self.models = list(models)
    if not self.models:
      raise ValueError("an ensemble needs at least one model")
    configs = [m.config for m in self.models]
    # decode_lengths and decode read the positions: with any learned
    # table, outputs and inputs stop at the shortest table's end.
    learned = [c.max_length for c in configs
               if c.position_encoding == "learned"]
    self.config = configs[0]
    if learned:
      self.config = dataclasses.replace(configs[0],
                                        position_encoding="learned",
                                        max_length=min(learned))

  def search_weights(self, int8=False, keep_variables=False,
                     int8_weights_first=False, laid_out_kernels=True):
    """An `EnsembleWeights`: each model's `search_weights`."""
    return EnsembleWeights(tuple(
        m.search_weights(int8=int8, keep_variables=keep_variables,
                         int8_weights_first=int8_weights_first,
                         laid_out_kernels=laid_out_kernels)
        for m in self.models))

  def prepare_decoding(self, inputs, max_decode_length=None,
                       search_weights=None):
    """As `Transformer.prepare_decoding`, for the models together.

    Args:
      search_weights: None (each model's float ones, made here), or
        `self.search_weights(...)`, an `EnsembleWeights`.
    Returns:
      (decode_step(ids int32 [rows], step, cache) -> (float32 [rows, V] the
      mean of the models' log-probabilities, cache); the initial cache
      {"models": [each model's cache]}).
    """
    if search_weights is None:
      search_weights = self.search_weights()
    steps, caches = zip(*[
        model.prepare_decoding(inputs, max_decode_length,
                               search_weights=weights)
        for model, weights in zip(self.models, search_weights.members)])

    def decode_step(ids, step, cache):
      log_probs, new_caches = [], []
      for model_step, model_cache in zip(steps, cache["models"]):
        logits, model_cache = model_step(ids, step, model_cache)
        log_probs.append(tf.nn.log_softmax(tf.cast(logits, tf.float32)))
        new_caches.append(model_cache)
      return tf.add_n(log_probs) / len(log_probs), {"models": new_caches}

    return decode_step, {"models": list(caches)}
