"""What a registered problem sets for decoding: its default decode hparams
and its decoding constraint, looked up by the problem's name.

Kept out of `t2tlite.decode` (which knows no problems) for the commands and
the exporter, which decode a run trained on a named problem.
"""
from t2tlite import problem as problem_lib
from t2tlite import registry
from t2tlite.decode.settings import DecodeHParams


def decode_hparams(problem, overrides="", base=None):
  """Decode settings, parsed once for a command or a request: `overrides`
  ("beam_size=2,alpha=0") on top of `base`, a DecodeHParams (an export's
  settings, a server's defaults, kept parsed), or when base is None on top
  of problem `problem`'s (a name) `decode_defaults` (e.g. parsing: the
  paper's beam 21 and input length + 300, alpha 0). Bad overrides raise
  ValueError naming them."""
  if base is None:
    base = DecodeHParams.parse(problem_lib.decode_defaults(problem))
  return DecodeHParams.parse(overrides, base)


def decode_constraint(problem_name, vocab, target_vocab, hp):
  """The decoding constraint of problem `problem_name`
  (`Problem.decode_constraint`), or None: when hp.constrained is false, the
  problem has none, or it is not registered (a plugin not loaded:
  `decode_defaults` warns of it)."""
  if not hp.constrained:
    return None
  try:
    problem = problem_lib.get_problem(problem_name)
  except registry.RegistryError:
    return None
  return problem.decode_constraint(vocab, target_vocab)
