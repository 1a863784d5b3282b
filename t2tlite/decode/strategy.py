"""What a decode request asks for, typed: how each output token is chosen
(`Greedy`, `Beam` or `Sample`, each with exactly the settings it reads),
what bounds every output (`OutputLimits`), and both with the machine's
choices in a `DecodePlan`, built once from the settled decode hparams.

    plan = DecodePlan.from_settled(machine.settle(hp))
    result = search.decode(model, inputs, plan)

The searches take these whole: no setting has a default below
`settings.DecodeHParams`.
"""
import dataclasses
from typing import Union

from t2tlite.decode import machine


@dataclasses.dataclass(frozen=True)
class Greedy:
  """The most probable token at every step (beam_size=1, as in
  tensor2tensor).

  beam_axis: outputs get a beam axis of size 1 (return_beams).
  """
  beam_axis: bool


@dataclasses.dataclass(frozen=True)
class Beam:
  """Beam search with the GNMT length penalty ((5 + length) / 6) ** alpha.

  size: hypotheses kept (>= 2); alpha: the penalty's exponent (>= 0);
  return_beams: every beam (n-best, best first), not only the best.
  """
  size: int
  alpha: float
  return_beams: bool


@dataclasses.dataclass(frozen=True)
class Sample:
  """Each token drawn from the model's distribution (`sampling`).

  temperature: > 0, divides the logits; top_k: 0 (all) or the k most
  probable; top_p: in (0, 1], nucleus; seed: outputs are a function of
  it and the input sentence; num_samples: outputs per input; epsilon: in
  [0, 1), tokens less probable than it are not drawn (0: off).
  """
  temperature: float
  top_k: int
  top_p: float
  seed: int
  num_samples: int
  epsilon: float = 0.0


Strategy = Union[Greedy, Beam, Sample]


@dataclasses.dataclass(frozen=True)
class OutputLimits:
  """What bounds every output, whatever the strategy.

  extra_length: outputs stop at input length + extra_length tokens;
  min_length: no EOS before this many tokens; no_repeat_ngram_size: n > 0,
  no output holds an n-gram twice (0: off).
  """
  extra_length: int
  min_length: int
  no_repeat_ngram_size: int


@dataclasses.dataclass(frozen=True)
class DecodePlan:
  """A decode request as the searches run it.

  strategy: Greedy, Beam or Sample; limits: OutputLimits; int8: the int8
  search; int8_weights_first: its kernels' layout, as settled for the
  machine (`precision.int8_support`); concurrent_searches: searches side by
  side over blocks of a batch's rows (>= 1, settled).
  """
  strategy: Strategy
  limits: OutputLimits
  int8: bool
  int8_weights_first: bool
  concurrent_searches: int

  @classmethod
  def from_settled(cls, settled):
    """The plan of decode hparams settled for this machine: a
    `machine.SettledDecode` (concurrent_searches a number, int8 decided).

    Raises:
      TypeError: raw (unsettled) hparams.
    """
    if not isinstance(settled, machine.SettledDecode):
      raise TypeError(f"decoding takes settled decode hparams, got "
                      f"{type(settled).__name__}: settle them for this "
                      "machine first (machine.settle)")
    hp = settled.hp
    if hp.sampling:
      strategy = Sample(hp.sampling_temperature, hp.top_k, hp.top_p,
                        hp.sampling_seed, hp.num_samples, hp.epsilon)
    elif hp.beam_size == 1:
      strategy = Greedy(beam_axis=hp.return_beams)
    else:
      strategy = Beam(hp.beam_size, hp.alpha, hp.return_beams)
    limits = OutputLimits(hp.extra_length, hp.min_length,
                          hp.no_repeat_ngram_size)
    return cls(strategy, limits, settled.int8, settled.weights_first,
               settled.searches)
