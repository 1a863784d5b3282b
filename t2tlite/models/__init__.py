"""Models, built by their registered name (t2tlite.registry.models; the
Transformer registers itself as "transformer", plugins add others)."""
from t2tlite import registry

DEFAULT_MODEL = "transformer"


def build_model(hp, vocab_size, dtype=None, model=DEFAULT_MODEL,
                target_vocab_size=None, word_pointer=None):
  """A built model of the class registered as `model`.

  Args:
    hp: HParams.
    vocab_size: shared (or input) vocabulary size.
    dtype: optional Keras dtype policy name, e.g. "mixed_bfloat16".
    model: a name in t2tlite.registry.models.
    target_vocab_size: the targets' own vocabulary size; None when they
      share the input vocabulary (then not passed on, so models without
      separate vocabularies still work).
    word_pointer: None, or the tables of the decoder's word pointer
      (`word_pointer_tables`; passed on only when given).
  Returns:
    The model, its variables created.
  Raises:
    registry.RegistryError: unknown model name (with close matches).
  """
  model_class = registry.models.get(model)
  kwargs = {"dtype": dtype} if dtype else {}
  if target_vocab_size is not None:
    kwargs["target_vocab_size"] = target_vocab_size
  if word_pointer is not None:
    kwargs["word_pointer"] = word_pointer
  built = model_class.from_hparams(hp, vocab_size, **kwargs)
  built.build_by_calling()
  return built


def word_pointer_tables(hp, problem, input_vocab, target_vocab):
  """The word pointer's tables when `hp.word_pointer` asks for one, else None.

  Args:
    hp: HParams.
    problem: the Problem; its `word_pointer_tables` gives the tables.
    input_vocab, target_vocab: its Vocabulary objects (the same one twice
      when shared).
  Returns:
    None, or {"word_starts": [bool per input id], "word_tokens": [bool per
    target id]} for build_model.
  Raises:
    ValueError: hp.word_pointer is set but the problem's targets do not
      stand for the source words one by one.
  """
  if not hp.word_pointer:
    return None
  tables = problem.word_pointer_tables(input_vocab, target_vocab)
  if tables is None:
    raise ValueError(
        f"hparam word_pointer=true needs a problem whose target tokens stand "
        f"for the source words one by one (parsing_wsj's tags); "
        f"{problem.name} has none: drop word_pointer.")
  return tables
