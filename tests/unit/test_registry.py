"""The generic registry: duplicates refused, unknown names get close matches."""
import sys

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


def test_a_plugin_that_fails_to_import_can_be_imported_once_mended(
    tmp_path):
  folder = tmp_path / "broken_plugin"
  folder.mkdir()
  init = folder / "__init__.py"
  init.write_text("raise RuntimeError('a mistake in the plugin')\n")
  before = set(sys.modules)
  with pytest.raises(RuntimeError, match="a mistake in the plugin"):
    registry.import_usr_dir(str(folder))
  # No half-made module left behind, and the folder is not taken as loaded.
  assert set(sys.modules) == before
  init.write_text("MENDED = True\n")
  registry.import_usr_dir(str(folder))
  try:
    assert [name for name in set(sys.modules) - before
            if getattr(sys.modules[name], "MENDED", False)]
  finally:
    for name in set(sys.modules) - before:
      del sys.modules[name]


def test_hooks_check_names_and_derive_variants():
  def check(name):
    if name.startswith("x"):
      raise ValueError(f"'{name}': names starting with x are reserved")

  reg = registry.Registry("widget", check_name=check,
                          variants=lambda name, obj: {name + "_big": obj * 10},
                          variants_note="each also as NAME_big")
  reg.add("blue", 1)
  assert reg.get("blue_big") == 10 and reg.names() == ["blue"]
  with pytest.raises(ValueError, match="reserved"):
    reg.add("xray", 2)
  with pytest.raises(registry.RegistryError, match="Did you mean: blue_big"):
    reg.get("blue_bag")
  with pytest.raises(registry.RegistryError,
                     match=r"Registered: blue \(each also as NAME_big\)"):
    reg.get("zzzzzz")


def test_builtins_load_on_first_use(monkeypatch, tmp_path):
  (tmp_path / "builtin_widgets_for_test.py").write_text(
      "from t2tlite import registry\n"
      "registry.widgets.add('builtin', 1)\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  reg = registry.Registry("widget", builtins="builtin_widgets_for_test")
  monkeypatch.setattr(registry, "widgets", reg, raising=False)
  reg.add("mine", 2)  # the built-ins come first, so clashes are detected
  assert reg.names() == ["builtin", "mine"]


def test_did_you_mean():
  assert registry.did_you_mean("dropuot", ["dropout", "d_model"]) == (
      " Did you mean: dropout?")
  assert registry.did_you_mean("zzz", ["dropout"]) == ""


def test_models_registry_holds_the_transformer():
  from t2tlite.models.transformer import Transformer
  assert registry.models.get("transformer") is Transformer


def test_usr_dir_imported_once_under_any_spelling(monkeypatch, tmp_path):
  plugin = tmp_path / "my_plugin"
  plugin.mkdir()
  (plugin / "__init__.py").write_text(
      "from t2tlite import registry\n"
      "registry.widgets.add('plugin_widget', 1)\n")
  reg = registry.Registry("widget")
  monkeypatch.setattr(registry, "widgets", reg, raising=False)
  monkeypatch.setenv("HOME", str(tmp_path))
  monkeypatch.setattr(registry, "_loaded_usr_dirs", set())
  # Removed again after the test (import_usr_dir puts it in sys.modules).
  monkeypatch.setitem(sys.modules, "t2t_usr_my_plugin", None)
  registry.import_usr_dir("~/my_plugin")
  # The same folder again, as an absolute path: not run a second time.
  registry.import_usr_dir(str(plugin))
  assert reg.names() == ["plugin_widget"]


def test_usr_dirs_of_the_same_name_each_register_their_own(monkeypatch,
                                                          tmp_path):
  reg = registry.Registry("widget")
  monkeypatch.setattr(registry, "widgets", reg, raising=False)
  monkeypatch.setattr(registry, "_loaded_usr_dirs", set())
  folders = []
  for owner in ("a", "b"):
    plugin = tmp_path / owner / "team_plugins"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("from . import widgets\n")
    (plugin / "widgets.py").write_text(
        "from t2tlite import registry\n"
        f"registry.widgets.add('{owner}_widget', 1)\n")
    folders.append(str(plugin))
  before = set(sys.modules)
  try:
    for folder in folders:
      registry.import_usr_dir(folder)
  finally:
    for name in set(sys.modules) - before:
      del sys.modules[name]
  # The second folder's `from . import widgets` runs its own module.
  assert reg.names() == ["a_widget", "b_widget"]


def test_error_message_is_shown_unquoted():
  reg = registry.Registry("widget")
  reg.add("alpha", 1)
  with pytest.raises(registry.RegistryError) as error:
    reg.get("zzzzzz")
  assert str(error.value) == "Unknown widget 'zzzzzz'. Registered: alpha."


def test_membership_loads_the_builtins_first(monkeypatch, tmp_path):
  module = "membership_widgets_for_test"
  (tmp_path / f"{module}.py").write_text(
      "from t2tlite import registry\n"
      "registry.widgets.add('builtin', 1)\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  reg = registry.Registry("widget", builtins=module)
  monkeypatch.setattr(registry, "widgets", reg, raising=False)
  try:
    assert "builtin" in reg and "other" not in reg
  finally:
    sys.modules.pop(module, None)
