"""HParams: an immutable, typed set of hyperparameters.

Field names follow the paper (Vaswani et al., 2017). Every field is read by the
model, the input pipeline or the trainer; nothing is accepted silently.
"""
import dataclasses
import json

from t2tlite import registry

_CHOICES = {
    "position_encoding": ("sinusoid", "learned"),
    "norm_position": ("post", "pre"),
}


@dataclasses.dataclass(frozen=True)
class HParams:
  """Hyperparameters of a Transformer run.

  Model (section 3): num_layers (N, encoder and decoder each), d_model, d_ff,
  num_heads (h), d_k and d_v (per head), position_encoding, norm_position,
  layer_norm_epsilon, max_length (longest source or target, in subword tokens;
  also the size of the learned position table).
  Regularization (section 5.4): dropout (P_drop: residual and embedding
  dropout), attention_dropout (on attention weights), relu_dropout (inside the
  feed-forward network), label_smoothing (eps_ls).
  Optimizer (section 5.3): adam_beta1, adam_beta2, adam_epsilon, warmup_steps,
  learning_rate_scale (a factor on eq. (3); 1.0 is the paper),
  learning_rate_cooldown_steps (the last this many of train_steps scale eq.
  (3) down linearly towards 0; 0, the paper's schedule, leaves it alone).
  Batching and schedule: batch_size (padded tokens per replica per step, as in
  tensor2tensor), gradient_accumulation_steps (batches each replica adds up
  before one optimizer update: one update sees batch_size x replicas x
  gradient_accumulation_steps padded tokens, so 1 GPU with 8 reproduces the
  paper's 8-GPU step), train_steps (optimizer updates).
  Problem-specific: word_pointer (the decoder input also gets a pointer to
  the source word its next word token is for: for problems whose targets
  hold one token per source word, parsing; `t2tlite.layers.word_pointer`).
  Mixtures of problems (`t2tlite.mixture`): mixing_rates (the members'
  shares of the training examples, in the mixture's order, comma-separated,
  normalised; "" draws by size), mixing_temperature (T: by size, member i's
  share is proportional to n_i^(1/T); fairseq's --sampling-temperature).
  """
  num_layers: int = 6
  d_model: int = 512
  d_ff: int = 2048
  num_heads: int = 8
  d_k: int = 64
  d_v: int = 64
  dropout: float = 0.1
  attention_dropout: float = 0.0
  relu_dropout: float = 0.0
  label_smoothing: float = 0.1
  position_encoding: str = "sinusoid"
  norm_position: str = "post"
  layer_norm_epsilon: float = 1e-6
  max_length: int = 256
  warmup_steps: int = 4000
  learning_rate_scale: float = 1.0
  learning_rate_cooldown_steps: int = 0
  adam_beta1: float = 0.9
  adam_beta2: float = 0.98
  adam_epsilon: float = 1e-9
  batch_size: int = 4096
  gradient_accumulation_steps: int = 1
  train_steps: int = 100000
  word_pointer: bool = False
  mixing_rates: str = ""
  mixing_temperature: float = 1.0

  def __post_init__(self):
    check_field_types(self)
    for name, allowed in _CHOICES.items():
      if getattr(self, name) not in allowed:
        raise ValueError(f"hparam {name}={getattr(self, name)!r}: expected one "
                         f"of {', '.join(allowed)}")
    for name in ("num_layers", "d_model", "d_ff", "num_heads", "d_k", "d_v",
                 "max_length", "batch_size", "gradient_accumulation_steps",
                 "train_steps", "warmup_steps"):
      if getattr(self, name) <= 0:
        raise ValueError(f"hparam {name} must be positive, got "
                         f"{getattr(self, name)}")
    if self.mixing_temperature <= 0:
      raise ValueError(f"hparam mixing_temperature must be positive, got "
                       f"{self.mixing_temperature}")
    parse_rates(self.mixing_rates)
    for name in ("dropout", "attention_dropout", "relu_dropout",
                 "label_smoothing"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise ValueError(f"hparam {name} must be in [0, 1), got "
                         f"{getattr(self, name)}")

  def replace(self, **changes):
    """A copy with some fields changed (validated like any construction)."""
    unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
    if unknown:
      raise ValueError(_unknown_message(sorted(unknown)[0]))
    return dataclasses.replace(self, **changes)

  def override(self, overrides):
    """A copy with `"name=value,name=value"` applied, each value typed.

    Raises:
      ValueError: an unknown name, a malformed pair or an unparseable value.
    """
    return self.replace(**parse_overrides(overrides))

  def to_dict(self):
    return dataclasses.asdict(self)

  def to_json(self):
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text, source="hparams JSON"):
    """HParams of `text` (`to_json`'s form). Raises ValueError naming
    `source` (the file read): not a JSON object, or unknown fields."""
    try:
      values = json.loads(text)
    except json.JSONDecodeError as error:
      raise ValueError(f"{source}: not JSON ({error})") from None
    if not isinstance(values, dict):
      raise ValueError(f"{source}: expected a JSON object of hparams")
    unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
      raise ValueError(f"{source}: unknown hparams {sorted(unknown)} (written "
                       f"by another version of t2tlite?)")
    return cls(**values)


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(HParams)}


def parse_rates(text):
  """The floats of a mixing_rates value ("0.5,0.5" or "0.5 0.5"), [] for
  "". Raises ValueError: not numbers, negative, or all zero."""
  try:
    rates = [float(r) for r in text.replace(",", " ").split()]
  except ValueError:
    raise ValueError(f"hparam mixing_rates={text!r}: expected numbers "
                     "separated by commas") from None
  if rates and (min(rates) < 0 or sum(rates) <= 0):
    raise ValueError(f"hparam mixing_rates={text!r}: expected non-negative "
                     "rates, not all zero")
  return rates


# Typed frozen dataclasses of settings (HParams here, DecodeHParams in
# t2tlite/decode) share the checks and "a=1,b=2" parsing below; `what` names
# the kind of setting in error messages.


def check_field_types(obj, what="hparam"):
  """Checks each field of dataclass `obj` against its type (ints accepted for
  floats and converted; bools not accepted for ints). Call in __post_init__.

  Raises:
    TypeError: naming the field, the expected type and the value.
  """
  for field in dataclasses.fields(obj):
    value = getattr(obj, field.name)
    if field.type is float and isinstance(value, int) and not isinstance(
        value, bool):
      object.__setattr__(obj, field.name, float(value))
    elif not isinstance(value, field.type) or (
        field.type is int and isinstance(value, bool)):
      raise TypeError(f"{what} {field.name} must be {field.type.__name__}, "
                      f"got {value!r}")


def _unknown_message(name, field_types=None, what="hparam"):
  hint = registry.did_you_mean(name, field_types or _FIELD_TYPES, n=3)
  return f"Unknown {what} '{name}'.{hint}"


def _parse_value(name, text, kind, what):
  try:
    if kind is bool:
      if text.lower() not in ("true", "false"):
        raise ValueError
      return text.lower() == "true"
    return kind(text)
  except ValueError:
    raise ValueError(f"{what} {name}={text!r}: expected a "
                     f"{kind.__name__}") from None


def parse_typed_overrides(overrides, field_types, what="hparam"):
  """Parses `"a=1,b=2"` into `{"a": 1, "b": 2}`, typed by `field_types`
  ({name: type}; bool values are true/false).

  A piece without "=" after a string field continues its value: in
  "mixing_rates=0.5,0.5,dropout=0.1" mixing_rates is "0.5,0.5".

  Raises:
    ValueError: an unknown name (with close matches), a malformed pair or an
      unparseable value.
  """
  changes = {}
  name = None
  for pair in filter(None, (p.strip() for p in (overrides or "").split(","))):
    if "=" not in pair and name is not None and field_types[name] is str:
      changes[name] += "," + pair
      continue
    name, sep, text = pair.partition("=")
    name = name.strip()
    if not sep or not name:
      raise ValueError(f"{what}s override {pair!r}: expected name=value")
    if name not in field_types:
      raise ValueError(_unknown_message(name, field_types, what))
    changes[name] = _parse_value(name, text.strip(), field_types[name], what)
  return changes


def parse_overrides(overrides):
  """Parses `"a=1,b=2"` into `{"a": 1, "b": 2}` typed by the HParams fields."""
  return parse_typed_overrides(overrides, _FIELD_TYPES)


def register_hparams(fn):
  """Registers a named hparams set: a function returning `HParams`."""
  return registry.hparams_sets.register()(fn)


def create_hparams(name, overrides=""):
  """The registered set `name` with `overrides` ("a=1,b=2") applied."""
  return registry.hparams_sets.get(name)().override(overrides)
