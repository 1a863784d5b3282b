"""The check every equivalence test makes of what it compares: two ways of
computing that agree on outputs that are all the same (an untrained model
repeating one token whatever it reads) would prove little."""


def _filled(value):
  """False for "", PAD (0) and lists of nothing else, at any depth."""
  if isinstance(value, (list, tuple)):
    return any(_filled(item) for item in value)
  return bool(value)


def assert_outputs_differ(outputs, what="outputs"):
  """Fails unless `outputs` (one per input: strings, id lists, rows of
  beams, as Python values) hold at least two different filled values."""
  seen = {repr(output) for output in outputs if _filled(output)}
  assert len(seen) >= 2, (
      f"the {what} compared are all the same ({len(outputs)} inputs): "
      f"{list(outputs)[:3]}")
