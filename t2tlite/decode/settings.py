"""Decoding settings: `DecodeHParams`, as t2t-decoder's --decode_hparams,
an export and `decoding.Decoder` take them.

    hp = DecodeHParams.parse("beam_size=4,alpha=0.6")

A run's settings (its problem's defaults, an export's or a server's, with
overrides on top) come from `t2tlite.problem_decoding.decode_hparams`, which
parses with `DecodeHParams.parse`: the one parser of decode settings.
The searches read them as one `strategy.DecodePlan` (Greedy, Beam or
Sample, and the output limits), built from settled hparams
(`DecodePlan.from_settled`).
"""
import dataclasses

from t2tlite import hparams_lib


@dataclasses.dataclass(frozen=True)
class DecodeHParams:
  """Decoding settings (paper section 6.1 defaults).

  beam_size: hypotheses kept; 1 means greedy search (as in tensor2tensor).
  alpha: GNMT length-penalty exponent ((5 + length) / 6) ** alpha.
  extra_length: outputs stop at (input length + extra_length) tokens.
  min_length: outputs hold at least this many tokens before EOS (EOS is
    not chosen at earlier positions, as fairseq's --min-len and
    CTranslate2's min_decoding_length); an output whose length limit
    comes first ends there without EOS. 0: no minimum.
  no_repeat_ngram_size: n > 0: no output holds the same n tokens in a row
    twice (fairseq's --no-repeat-ngram-size, CTranslate2's
    no_repeat_ngram_size), searched or sampled; 0: off.
  batch_size: sentences decoded together.
  return_beams: also return every beam with its score (n-best).
  constrained: apply the problem's decoding constraint, if it has one
    (`Problem.decode_constraint`; parsing: well-formed trees).
  int8: multiply the layers' maps and the output projection in int8
    (`t2tlite.layers.int8`): outputs change a little; faster where
    float32 matmuls are slow (AVX2; BUILD_NOTES.md, "int8 decoding").
    Not with XLA (the int8 kernel has no XLA form).
  concurrent_searches: searches that decode one batch side by side, each
    over a part of its sentences (`search.decode`); 0 (auto): 2 on a
    CPU with two or more cores, else 1 (`machine.searches_for`). float32
    and bfloat16 outputs are those of one search (int8 ones can differ a
    little on CPUs without VNNI, where its kernel depends on the row
    count).
  sampling_temperature: 0 searches (greedy or beam, as beam_size says);
    > 0 samples each output token from the model's distribution with its
    logits divided by this (`t2tlite.decode.sampling`; beam_size is then
    unused).
  top_k: sample among the k most probable tokens only; 0: all.
  top_p: sample among the smallest set of most probable tokens whose
    probability reaches top_p (nucleus sampling); 1: all. In (0, 1].
  epsilon: epsilon sampling (Hewitt et al., 2022): tokens whose
    probability (after the temperature) is under epsilon are not drawn,
    the most probable one always may be; 0: off. In [0, 1).
  sampling_seed: outputs are a function of the seed and the input
    sentence, whatever else shares its batch.
  num_samples: outputs sampled per input (each line then holds them all,
    as with return_beams).
  xla_lines: a Decoder's batches of at most this many lines are searched
    by an XLA-compiled search (`decoding.Decoder`): rows padded to 1, 2,
    4, 8, ... and tokens to a multiple of 16 (`decoding`), one compile
    (seconds) per shape, after which a small model's single line decodes
    up to 2.5 times faster (docs/decoding.md, "Small batches with XLA").
    Greedy and beam search without target prefixes; sampling and
    prefixed batches keep the graph. 0: never. Not with int8.
  """
  beam_size: int = 4
  alpha: float = 0.6
  extra_length: int = 50
  min_length: int = 0
  no_repeat_ngram_size: int = 0
  batch_size: int = 32
  return_beams: bool = False
  constrained: bool = True
  int8: bool = False
  concurrent_searches: int = 0
  sampling_temperature: float = 0.0
  top_k: int = 0
  top_p: float = 1.0
  epsilon: float = 0.0
  sampling_seed: int = 0
  num_samples: int = 1
  xla_lines: int = 0

  def __post_init__(self):
    hparams_lib.check_field_types(self, "decode hparam")
    for name in ("beam_size", "batch_size"):
      if getattr(self, name) < 1:
        raise ValueError(f"decode hparam {name} must be >= 1, got "
                         f"{getattr(self, name)}")
    for name in ("alpha", "extra_length", "min_length",
                 "no_repeat_ngram_size", "concurrent_searches",
                 "xla_lines"):
      if getattr(self, name) < 0:
        raise ValueError(f"decode hparam {name} must be >= 0, got "
                         f"{getattr(self, name)}")
    self._check_sampling()
    if self.xla_lines and self.int8:
      raise ValueError("decode hparam xla_lines needs int8=false: the int8 "
                       "kernel has no XLA form")

  def _check_sampling(self):
    if self.sampling_temperature < 0:
      raise ValueError("decode hparam sampling_temperature must be > 0 to "
                       "sample (0: search), got "
                       f"{self.sampling_temperature}")
    if self.top_k < 0:
      raise ValueError(f"decode hparam top_k must be >= 0, got {self.top_k}")
    if not 0 < self.top_p <= 1:
      raise ValueError(f"decode hparam top_p must be in (0, 1], got "
                       f"{self.top_p}")
    if not 0 <= self.epsilon < 1:
      raise ValueError(f"decode hparam epsilon must be in [0, 1), got "
                       f"{self.epsilon}")
    if self.num_samples < 1:
      raise ValueError(f"decode hparam num_samples must be >= 1, got "
                       f"{self.num_samples}")
    asked = [name for name, unset in (("top_k", 0), ("top_p", 1.0),
                                      ("epsilon", 0.0), ("num_samples", 1))
             if getattr(self, name) != unset]
    if asked and not self.sampling_temperature:
      raise ValueError(f"decode hparam {asked[0]}={getattr(self, asked[0])} "
                       "samples: it needs sampling_temperature > 0 (got 0, "
                       "which searches)")
    if self.sampling_temperature and self.return_beams:
      raise ValueError("decode hparam return_beams is for beam search; "
                       "with sampling_temperature > 0 ask for num_samples")

  @property
  def sampling(self):
    """Outputs are sampled (sampling_temperature > 0), not searched."""
    return self.sampling_temperature > 0

  @property
  def multiple_outputs(self):
    """Each input gets a list of outputs (n-best beams or samples): as
    its strategy says (`strategy.of`)."""
    return _strategy_of(self).multiple_outputs

  @property
  def outputs_per_input(self):
    """Search rows an input costs (beams or samples): the outputs in its
    list when multiple_outputs."""
    return _strategy_of(self).rows_per_input

  @property
  def width_hparam(self):
    """The name of the hparam that sets outputs_per_input (beam_size or
    num_samples)."""
    return _strategy_of(self).WIDTH

  def with_every_output(self):
    """These settings listing every output of an input, as an n-best asks:
    every beam; a sampling's num_samples samples as they are."""
    return _strategy_of(self).every_output(self)

  @classmethod
  def parse(cls, text, base=None):
    """From `"beam_size=4,alpha=0.6"`, on top of `base` (a DecodeHParams;
    None: the defaults above); unknown names and bad values raise
    ValueError naming them."""
    types = {f.name: f.type for f in dataclasses.fields(cls)}
    changes = hparams_lib.parse_typed_overrides(text, types, "decode hparam")
    return dataclasses.replace(base or cls(), **changes)

  @classmethod
  def from_record(cls, record):
    """From a dict of fields as an export's metadata records them (fields
    this version does not know are left out: an older or newer export)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in record.items() if k in names})


def _strategy_of(hp):
  # strategy.py builds on this module (its classes read DecodeHParams):
  # imported when asked.
  from t2tlite.decode import strategy  # pylint: disable=import-outside-toplevel
  return strategy.of(hp)
