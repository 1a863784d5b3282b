"""The generic registry: duplicates refused, unknown names get close matches."""
import pytest

import t2tlite
from t2tlite import registry


def test_register_and_get():
  reg = registry.Registry("widget")

  @reg.register()
  def blue_widget():
    return "blue"

  reg.add("red_widget", lambda: "red")
  assert reg.get("blue_widget")() == "blue"
  assert reg.names() == ["blue_widget", "red_widget"]
  assert "red_widget" in reg


def test_duplicate_name_is_an_error():
  reg = registry.Registry("widget")
  reg.add("a", 1)
  with pytest.raises(registry.RegistryError, match="widget 'a' is already"):
    reg.add("a", 2)


def test_unknown_name_lists_close_matches():
  with pytest.raises(registry.RegistryError) as error:
    t2tlite.create_hparams("transformer_bse")
  message = str(error.value)
  assert "Unknown hparams set 'transformer_bse'" in message
  assert "transformer_base" in message


def test_unknown_name_without_close_match_lists_all():
  reg = registry.Registry("widget")
  reg.add("alpha", 1)
  with pytest.raises(registry.RegistryError, match="Registered: alpha"):
    reg.get("zzzzzz")


def test_builtin_sets_registered_on_import():
  names = registry.hparams_sets.names()
  for name in ("transformer_base", "transformer_big", "transformer_tiny",
               "transformer_parsing", "transformer_base_a1",
               "transformer_base_e"):
    assert name in names


def test_usr_dir_without_init_fails_clearly(tmp_path):
  with pytest.raises(FileNotFoundError, match="__init__.py"):
    registry.import_usr_dir(str(tmp_path))
