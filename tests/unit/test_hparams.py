"""HParams: typed overrides, JSON, the paper's named sets."""
import dataclasses
import pathlib
import re

import pytest

import t2tlite
from t2tlite import registry
from t2tlite.hparams_lib import HParams

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_override_parses_types():
  hp = t2tlite.create_hparams(
      "transformer_base", "d_model=256,dropout=0.2,position_encoding=learned")
  assert hp.d_model == 256 and isinstance(hp.d_model, int)
  assert hp.dropout == 0.2 and isinstance(hp.dropout, float)
  assert hp.position_encoding == "learned"
  # The registered set itself is unchanged (immutable values).
  assert t2tlite.create_hparams("transformer_base").d_model == 512


def test_override_accepts_int_for_float_field():
  hp = t2tlite.create_hparams("transformer_base", "label_smoothing=0")
  assert hp.label_smoothing == 0.0 and isinstance(hp.label_smoothing, float)
  assert isinstance(HParams(adam_beta1=1).adam_beta1, float)


def test_a_bool_is_not_an_int_hparam():
  with pytest.raises(TypeError, match="hparam num_layers must be int, got "
                     "True"):
    HParams(num_layers=True)


def test_replace_with_an_unknown_field_names_close_matches():
  with pytest.raises(ValueError, match="Unknown hparam 'd_modle'. Did you "
                     "mean: d_model"):
    HParams().replace(d_modle=256)


@pytest.mark.parametrize("overrides, message", [
    ("d_modle=256", "Unknown hparam 'd_modle'. Did you mean: d_model"),
    ("d_model=big", r"d_model='big': expected a int"),
    ("dropout=0.1.2", "dropout='0.1.2': expected a float"),
    ("d_model", "expected name=value"),
    ("position_encoding=relative", "expected one of sinusoid, learned"),
    ("norm_position=middle", "expected one of post, pre"),
    ("num_heads=0", "num_heads must be positive"),
    ("warmup_steps=0", "warmup_steps must be positive"),
    ("dropout=1.5", r"dropout must be in \[0, 1\)"),
])
def test_bad_overrides_fail_clearly(overrides, message):
  with pytest.raises(ValueError, match=message):
    t2tlite.create_hparams("transformer_base", overrides)


def test_frozen():
  hp = HParams()
  with pytest.raises(dataclasses.FrozenInstanceError):
    hp.d_model = 3


def test_json_round_trip():
  hp = t2tlite.create_hparams("transformer_big", "warmup_steps=8000")
  assert HParams.from_json(hp.to_json()) == hp


def test_a_new_run_with_overrides_alone_asks_for_its_hparams_set(tmp_path):
  """Overrides apply to a run's saved hparams; a new output_dir (a child
  run's too) holds none, so the set must be named."""
  from t2tlite.train import run_hparams
  with pytest.raises(ValueError, match=r"hparams_set is required: \S+ holds "
                     "no hparams.json to continue from"):
    run_hparams.resolve_hparams(str(tmp_path), None, "d_ff=64")


def test_a_run_folders_bad_hparams_json_is_named(tmp_path):
  from t2tlite.train import run_hparams
  path = tmp_path / "hparams.json"
  for text, what in (('{"d_model": 4, "colour": "red"}',
                      "unknown hparams ['colour']"),
                     ('{"d_model": 4', "not JSON"),
                     ('[4]', "expected a JSON object")):
    path.write_text(text)
    with pytest.raises(ValueError) as error:
      run_hparams.resolve_hparams(str(tmp_path), None, None)
    assert str(error.value).startswith(f"{path}: {what}")


def test_base_and_big_match_the_paper():
  base = t2tlite.create_hparams("transformer_base")
  assert (base.num_layers, base.d_model, base.d_ff, base.num_heads, base.d_k,
          base.d_v) == (6, 512, 2048, 8, 64, 64)
  assert (base.dropout, base.label_smoothing) == (0.1, 0.1)
  assert (base.adam_beta1, base.adam_beta2, base.adam_epsilon) == (
      0.9, 0.98, 1e-9)
  assert (base.warmup_steps, base.train_steps) == (4000, 100000)
  assert (base.position_encoding, base.norm_position) == ("sinusoid", "post")
  big = t2tlite.create_hparams("transformer_big")
  assert (big.d_model, big.d_ff, big.num_heads, big.dropout,
          big.train_steps) == (1024, 4096, 16, 0.3, 300000)
  parsing = t2tlite.create_hparams("transformer_parsing")
  assert (parsing.num_layers, parsing.d_model) == (4, 1024)


# Table 3 rows: (name, the fields that differ from base).
TABLE3 = {
    "transformer_base_a1": dict(num_heads=1, d_k=512, d_v=512),
    "transformer_base_a2": dict(num_heads=4, d_k=128, d_v=128),
    "transformer_base_a3": dict(num_heads=16, d_k=32, d_v=32),
    "transformer_base_a4": dict(num_heads=32, d_k=16, d_v=16),
    "transformer_base_b1": dict(d_k=16),
    "transformer_base_b2": dict(d_k=32),
    "transformer_base_c1": dict(num_layers=2),
    "transformer_base_c2": dict(num_layers=4),
    "transformer_base_c3": dict(num_layers=8),
    "transformer_base_c4": dict(d_model=256, d_k=32, d_v=32),
    "transformer_base_c5": dict(d_model=1024, d_k=128, d_v=128),
    "transformer_base_c6": dict(d_ff=1024),
    "transformer_base_c7": dict(d_ff=4096),
    "transformer_base_d1": dict(dropout=0.0),
    "transformer_base_d2": dict(dropout=0.2),
    "transformer_base_d3": dict(label_smoothing=0.0),
    "transformer_base_d4": dict(label_smoothing=0.2),
    "transformer_base_e": dict(position_encoding="learned"),
}


@pytest.mark.parametrize("name", sorted(TABLE3))
def test_table3_rows_differ_from_base_only_as_listed(name):
  base = t2tlite.create_hparams("transformer_base").to_dict()
  row = t2tlite.create_hparams(name).to_dict()
  changed = {k: v for k, v in row.items() if base[k] != v}
  assert changed == TABLE3[name]


# The other built-in sets: (the set they build on, the fields their
# docstrings change), section 6's sets as the paper gives them.
RECIPES = {
    "transformer_big": ("transformer_base", dict(
        d_model=1024, d_ff=4096, num_heads=16, dropout=0.3,
        train_steps=300000)),
    "transformer_big_enfr": ("transformer_big", dict(dropout=0.1)),
    "transformer_parsing": ("transformer_base", dict(
        num_layers=4, d_model=1024, d_k=128, d_v=128, dropout=0.2,
        attention_dropout=0.2, max_length=512, warmup_steps=16000)),
    "transformer_tiny": ("transformer_base", dict(
        num_layers=2, d_model=64, d_ff=256, num_heads=4, d_k=16, d_v=16,
        norm_position="pre", dropout=0.0, max_length=64, batch_size=1024,
        warmup_steps=400, learning_rate_scale=0.25, train_steps=3000,
        learning_rate_cooldown_steps=1000)),
    "transformer_tiny_quick": ("transformer_tiny", dict(
        warmup_steps=200, learning_rate_scale=0.6,
        learning_rate_cooldown_steps=400, train_steps=1000)),
    "transformer_small": ("transformer_base", dict(
        num_layers=3, d_model=256, d_ff=1024, num_heads=4, dropout=0.3,
        max_length=128, warmup_steps=1000, train_steps=5000)),
    "transformer_parsing_small": ("transformer_small", dict(
        norm_position="pre", dropout=0.2, max_length=320, batch_size=2048,
        warmup_steps=400, learning_rate_cooldown_steps=3000,
        train_steps=13000)),
    "transformer_parsing_pointer": ("transformer_parsing_small", dict(
        word_pointer=True, train_steps=7000)),
    "transformer_multi30k": ("transformer_small", dict(
        dropout=0.2, warmup_steps=800, learning_rate_cooldown_steps=2000)),
}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_sets_differ_from_their_parent_only_as_documented(name):
  parent, changes = RECIPES[name]
  before = t2tlite.create_hparams(parent).to_dict()
  row = t2tlite.create_hparams(name).to_dict()
  assert {k: v for k, v in row.items() if before[k] != v} == changes


def test_every_built_in_set_is_in_a_table_of_its_values():
  built_in = [name for name in registry.hparams_sets.names()
              if registry.hparams_sets.get(name).__module__ ==
              "t2tlite.hparams.transformer"]
  assert sorted(built_in) == sorted(
      ["transformer_base", *TABLE3, *RECIPES])


def test_heads_split_d_model_except_in_table3_row_b():
  """h*d_k = h*d_v = d_model in every built-in set (section 3.2.2) but the
  (B) rows, which shrink only d_k."""
  for name in ["transformer_base", *TABLE3, *RECIPES]:
    hp = t2tlite.create_hparams(name)
    assert hp.num_heads * hp.d_v == hp.d_model, name
    if not name.startswith("transformer_base_b"):
      assert hp.num_heads * hp.d_k == hp.d_model, name


def test_every_named_set_is_valid():
  for name in registry.hparams_sets.names():
    assert isinstance(t2tlite.create_hparams(name), HParams)


def test_every_field_is_read_somewhere():
  """No field is accepted silently: each is read as `<obj>.<field>` in code
  other than hparams_lib.py (named sets only write them)."""
  sources = "\n".join(
      p.read_text() for p in (REPO / "t2tlite").rglob("*.py")
      if p.name != "hparams_lib.py")
  for field in dataclasses.fields(HParams):
    # Attribute reads (hp.x) or the model's list of architecture fields.
    pattern = rf"\.{field.name}\b|\"{field.name}\""
    assert re.search(pattern, sources), f"hparam {field.name} is never read"


def test_rates_of_exactly_one_are_refused():
  for name in ("dropout", "attention_dropout", "relu_dropout",
               "label_smoothing"):
    with pytest.raises(ValueError, match=rf"{name} must be in \[0, 1\)"):
      HParams(**{name: 1.0})
  assert HParams(dropout=0.0).dropout == 0.0


def test_bool_overrides_ignore_case():
  hp = HParams()
  assert hp.override("word_pointer=True").word_pointer is True
  assert hp.override("word_pointer=TRUE").word_pointer is True
  assert hp.override("word_pointer=False").word_pointer is False
  with pytest.raises(ValueError, match="word_pointer='yes': expected a bool"):
    hp.override("word_pointer=yes")


def test_a_mixing_rate_may_be_zero_but_not_all():
  assert HParams().override("mixing_rates=0.5,0").mixing_rates == "0.5,0"
  for bad in ("0,0", "0.5,-0.1"):
    with pytest.raises(ValueError, match="non-negative rates, not all zero"):
      HParams(mixing_rates=bad)


def test_a_piece_without_value_after_a_number_is_malformed():
  # Only a string field's value may hold commas.
  with pytest.raises(ValueError, match="override '0.2': expected name=value"):
    HParams().override("dropout=0.1,0.2")
