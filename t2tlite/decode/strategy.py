"""What a decode request asks for: how each output token is chosen, a
strategy with its own behaviour (`Greedy`, `Beam`, `Sample`,
`EpsilonSample`: the settings it reads, its next-token step, how many
outputs an input gets), what bounds every output (`OutputLimits`), and
both with the machine's choices in a `DecodePlan`, built once from the
settled decode hparams.

    plan = DecodePlan.from_settled(machine.settle(hp))
    result = search.decode(model, inputs, plan)

Every strategy runs in the one search loop (`loop.search`); a new one is a
class here (its `search`, a `loop.Searcher` or a `draw`), its decode
hparams (`settings`) and a line in `of`. The searches take these whole: no
setting has a default below `settings.DecodeHParams`.
"""
import dataclasses
from typing import Union

import tensorflow as tf

from t2tlite.decode import loop, machine, sampling
from t2tlite.decode.beam_search import BeamSearcher
from t2tlite.decode.greedy import GreedySearcher
from t2tlite.decode.settings import DecodeHParams

_DEFAULTS = DecodeHParams()


@dataclasses.dataclass(frozen=True)
class Greedy:
  """The most probable token at every step (beam_size=1, as in
  tensor2tensor).

  beam_axis: outputs get a beam axis of size 1 (return_beams).
  """
  beam_axis: bool

  name = "greedy search"
  HPARAMS = ("beam_size", "alpha", "return_beams")
  WIDTH = "beam_size"  # the hparam of the rows an input costs
  rows_per_input = 1
  outputs_per_input = 1

  @classmethod
  def from_hparams(cls, hp):
    return cls(beam_axis=hp.return_beams)

  @property
  def multiple_outputs(self):
    """Outputs come as a list per input (a beam axis)."""
    return self.beam_axis

  def shown(self, hp):
    """The decode hparams a log line names for this strategy."""
    return ["return_beams"] if hp.return_beams else []

  def every_output(self, hp):
    """DecodeHParams hp listing every output an input gets (an n-best):
    every beam."""
    return dataclasses.replace(hp, return_beams=True)

  def search(self, decode_step, cache, length, rules, limits, inputs,
             drop_finished):
    """(ids int32 [batch(, 1), length], scores float32 [batch(, 1)]) of
    `loop.search` (inputs: int32 [batch, src_len], unread)."""
    ids, scores = loop.search(decode_step, cache, GreedySearcher(), length,
                              rules, limits)
    if self.beam_axis:
      return ids[:, tf.newaxis], scores[:, tf.newaxis]
    return ids, scores


@dataclasses.dataclass(frozen=True)
class Beam:
  """Beam search with the GNMT length penalty ((5 + length) / 6) ** alpha.

  size: hypotheses kept (>= 2); alpha: the penalty's exponent (>= 0);
  return_beams: every beam (n-best, best first), not only the best.
  """
  size: int
  alpha: float
  return_beams: bool

  name = "beam search"
  HPARAMS = Greedy.HPARAMS
  WIDTH = Greedy.WIDTH
  every_output = Greedy.every_output

  @classmethod
  def from_hparams(cls, hp):
    return cls(hp.beam_size, hp.alpha, hp.return_beams)

  @property
  def rows_per_input(self):
    """Search rows an input costs."""
    return self.size

  @property
  def outputs_per_input(self):
    return self.size if self.return_beams else 1

  @property
  def multiple_outputs(self):
    return self.return_beams

  def shown(self, hp):
    return ["beam_size", "alpha"] + (
        ["return_beams"] if hp.return_beams else [])

  def search(self, decode_step, cache, length, rules, limits, inputs,
             drop_finished):
    """(ids int32 [batch(, size), length], scores float32 [batch(, size)],
    length-penalised) of `loop.search`."""
    return loop.search(decode_step, cache, BeamSearcher(self), length, rules,
                       limits, drop_finished)


@dataclasses.dataclass(frozen=True)
class Sample:
  """Each token drawn from the model's distribution (`sampling`).

  temperature: > 0, divides the logits; top_k: 0 (all) or the k most
  probable; top_p: in (0, 1], nucleus; seed: outputs are a function of
  it and the input sentence; num_samples: outputs per input.
  """
  temperature: float
  top_k: int
  top_p: float
  seed: int
  num_samples: int

  name = "sampling"
  HPARAMS = ("sampling_temperature", "top_k", "top_p", "epsilon",
             "sampling_seed", "num_samples")
  WIDTH = "num_samples"

  @classmethod
  def from_hparams(cls, hp):
    return cls(hp.sampling_temperature, hp.top_k, hp.top_p,
               hp.sampling_seed, hp.num_samples)

  @property
  def rows_per_input(self):
    return self.num_samples

  @property
  def outputs_per_input(self):
    return self.num_samples

  @property
  def multiple_outputs(self):
    return self.num_samples > 1

  def every_output(self, hp):
    """hp itself: its num_samples samples are every output, in order."""
    return hp

  def shown(self, hp):
    return ["sampling_temperature"] + [
        field for field in ("top_k", "top_p")
        if getattr(hp, field) != getattr(_DEFAULTS, field)] + [
            "sampling_seed", "num_samples"]

  def truncated(self, logits):
    """The logits [rows, V] (divided by the temperature) without the
    tokens this strategy never draws; all kept here."""
    return logits

  def draw(self, logits, u):
    """int32 [rows]: the tokens drawn from logits float32 [rows, V] at
    uniform numbers u float32 [rows] (`sampling.draw`)."""
    return sampling.draw(self.truncated(logits / self.temperature), u,
                         self.top_k, self.top_p)

  def search(self, decode_step, cache, length, rules, limits, inputs,
             drop_finished):
    """(ids int32 [batch(, num_samples), length], scores float32 [batch(,
    num_samples)]): each input's samples are elements of their own, its
    cache (the encoder's output: the encoder ran once) repeated to them."""
    n = self.num_samples
    _, keys = sampling.expand(self, inputs)
    if n > 1:
      cache = loop.repeat_elements(cache, n)
      limits, rules = tf.repeat(limits, n, axis=0), rules.repeated(n)
    ids, scores = loop.search(decode_step, cache,
                              sampling.SampleSearcher(self, keys), length,
                              rules, limits)
    if n > 1:
      ids = tf.reshape(ids, [-1, n, tf.shape(ids)[-1]])
      scores = tf.reshape(scores, [-1, n])
    return ids, scores


@dataclasses.dataclass(frozen=True)
class EpsilonSample(Sample):
  """Epsilon sampling (Hewitt et al., 2022): `Sample` without the tokens
  whose probability (after the temperature) is under epsilon, in (0, 1);
  the most probable token always stays (`sampling.without_improbable`)."""
  epsilon: float

  @classmethod
  def from_hparams(cls, hp):
    return cls(hp.sampling_temperature, hp.top_k, hp.top_p,
               hp.sampling_seed, hp.num_samples, hp.epsilon)

  def shown(self, hp):
    shown = super().shown(hp)
    return shown[:-2] + ["epsilon"] + shown[-2:]

  def truncated(self, logits):
    return sampling.without_improbable(logits, self.epsilon)


Strategy = Union[Greedy, Beam, Sample]
STRATEGIES = (Greedy, Beam, Sample, EpsilonSample)
# The decode hparams that belong to a strategy (a log line names those of
# the one in use only).
STRATEGY_HPARAMS = tuple(dict.fromkeys(
    name for cls in STRATEGIES for name in cls.HPARAMS))


def of(hp):
  """The strategy a `settings.DecodeHParams` asks for."""
  if hp.sampling:
    return (EpsilonSample if hp.epsilon else Sample).from_hparams(hp)
  return (Greedy if hp.beam_size == 1 else Beam).from_hparams(hp)


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

  strategy: Greedy, Beam or Sample (EpsilonSample); limits: OutputLimits;
  int8: the int8 search; int8_weights_first: its kernels' layout, as
  settled for the machine (`precision.int8_support`); concurrent_searches:
  searches side by side over blocks of a batch's rows (>= 1, settled);
  laid_out_kernels: a float32 search's decoder kernels' layout, as settled
  for the machine.
  """
  strategy: Strategy
  limits: OutputLimits
  int8: bool
  int8_weights_first: bool
  concurrent_searches: int
  laid_out_kernels: bool = True

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
    limits = OutputLimits(hp.extra_length, hp.min_length,
                          hp.no_repeat_ngram_size)
    return cls(of(hp), limits, settled.int8, settled.weights_first,
               settled.searches, settled.laid_out_kernels)
