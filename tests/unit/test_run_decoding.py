"""The road from a run to a Decoder refuses what it cannot load with one
line naming it, before any model is built."""
import pytest

from t2tlite import run_decoding
from t2tlite.export import exporter


def test_a_folder_without_a_run_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match=str(tmp_path)):
    run_decoding.load_run(str(tmp_path))


def test_an_empty_ensemble_member_is_named(tmp_path):
  with pytest.raises(ValueError, match="an empty name between commas"):
    run_decoding.load_run(str(tmp_path), f"{tmp_path},")


def test_an_export_of_an_ensemble_is_refused(tmp_path):
  with pytest.raises(ValueError, match="an export holds one model"):
    exporter.export_saved_model(str(tmp_path), checkpoint_path="A,B")
