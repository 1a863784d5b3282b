"""Models, built by their registered name (t2tlite.registry.models; the
Transformer registers itself as "transformer", plugins add others)."""
from t2tlite import registry

DEFAULT_MODEL = "transformer"


def build_model(hp, vocab_size, dtype=None, model=DEFAULT_MODEL,
                target_vocab_size=None):
  """A built model of the class registered as `model`.

  Args:
    hp: HParams.
    vocab_size: shared (or input) vocabulary size.
    dtype: optional Keras dtype policy name, e.g. "mixed_bfloat16".
    model: a name in t2tlite.registry.models.
    target_vocab_size: the targets' own vocabulary size; None when they
      share the input vocabulary (then not passed on, so models without
      separate vocabularies still work).
  Returns:
    The model, its variables created.
  Raises:
    registry.RegistryError: unknown model name (with close matches).
  """
  model_class = registry.models.get(model)
  kwargs = {"dtype": dtype} if dtype else {}
  if target_vocab_size is not None:
    kwargs["target_vocab_size"] = target_vocab_size
  built = model_class.from_hparams(hp, vocab_size, **kwargs)
  built.build_by_calling()
  return built
