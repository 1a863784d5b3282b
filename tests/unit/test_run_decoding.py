"""The road from a run to a Decoder refuses what it cannot load with one
line naming it, before any model is built."""
import pytest

from t2tlite import run_decoding
from t2tlite.export import exporter

from run_folder import needs_multi30k
from shared_run import shared_run_folder


def test_a_folder_without_a_run_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match=str(tmp_path)):
    run_decoding.load_run(str(tmp_path))


def test_an_empty_ensemble_member_is_named(tmp_path):
  with pytest.raises(ValueError, match="an empty name between commas"):
    run_decoding.load_run(str(tmp_path), f"{tmp_path},")


def test_an_export_of_an_ensemble_is_refused(tmp_path):
  with pytest.raises(ValueError, match="an export holds one model"):
    exporter.export_saved_model(str(tmp_path), checkpoint_path="A,B")


@needs_multi30k
def test_a_run_with_a_target_vocabulary_of_its_own_loads_both(
    tmp_path_factory):
  folder = shared_run_folder(tmp_path_factory, separate_target_vocab=True)
  run = run_decoding.load_run(folder)
  assert not run.ensemble
  # The inputs' vocabulary has 300 pieces, the targets' 250
  # (make_run_folder): each is read from its own file.
  assert run.vocab.size == run.info.vocab_size == 300
  assert run.target_vocab.size == run.info.target_vocab_size == 250
  assert run.target_vocab.path == run.info.target_vocab_file
  assert run.model.target_vocab_size == run.target_vocab.size


@needs_multi30k
def test_members_given_as_a_list_or_tuple_load_an_ensemble(
    tmp_path_factory):
  folder = shared_run_folder(tmp_path_factory, separate_target_vocab=True)
  for members in ([folder, folder], (folder, folder)):
    run = run_decoding.load_run(folder, members)
    assert run.ensemble
    assert len(run.model.models) == 2
    first, second = run.checkpoint.split(",")
    assert first == second and first.startswith(folder)
