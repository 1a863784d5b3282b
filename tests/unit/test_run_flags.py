"""The flags shared by the commands that read a training folder
(t2tlite.bin.run_flags) and --mixed_precision (precision_flags): how
--decode_hparams, --mixed_precision and --checkpoint_path become a
command's decode settings, compute precision and loaded checkpoint; and
t2t-exporter's own checks and the line it logs for an export."""
import json
import os
import sys

from absl import flags
import pytest
import tensorflow as tf

from t2tlite import run_dir
from t2tlite.bin import console
from t2tlite.decode.settings import DecodeHParams
from t2tlite.export.exporter import METADATA_FILE
import command_flags
from run_folder import TINY
from shared_run import run_copy

DECODER = "t2tlite.bin.t2t_decoder"
EXPORTER = "t2tlite.bin.t2t_exporter"
# One search: settling then leaves TensorFlow's threads alone.
ONE_SEARCH = "concurrent_searches=1"


def fake_run(folder, problem):
  """A run folder's run.json and hparams.json (no model, no checkpoint):
  all that settling the decode flags reads."""
  vocab = os.path.join(folder, "source.model")
  os.makedirs(folder, exist_ok=True)
  with open(vocab, "w") as f:
    f.write("not a sentencepiece model; only copied")
  run_dir.write_run_info(folder, TINY, problem, 20, vocab)
  return folder


def test_decode_hparams_apply_over_the_problems_defaults(tmp_path):
  folder = fake_run(str(tmp_path / "run"), "parsing_wsj")
  with command_flags.command_module(
      DECODER, output_dir=folder,
      decode_hparams=f"alpha=0.5,{ONE_SEARCH}") as command:
    info, settled = command.run_flags.settled_decode("Decoding")
  assert info.problem == "parsing_wsj"
  # parsing_wsj decodes with beam 21 and 300 extra tokens unless told.
  assert (settled.hp.beam_size, settled.hp.extra_length) == (21, 300)
  assert settled.hp.alpha == 0.5


def test_decoding_precision_follows_the_flag_and_is_logged(tmp_path,
                                                           caplog):
  folder = fake_run(str(tmp_path / "run"), "translate_ende_wmt")
  with command_flags.command_module(
      DECODER, output_dir=folder, decode_hparams=ONE_SEARCH,
      mixed_precision="bfloat16") as command:
    with caplog.at_level("INFO", logger="absl"):
      _, settled = command.run_flags.settled_decode("Decoding")
  assert settled.precision.precision == "bfloat16"
  assert settled.precision.requested == "bfloat16"
  assert ("Decoding computes in bfloat16 (mixed_precision=bfloat16)"
          in caplog.text)


def test_decoding_precision_is_auto_unless_asked(tmp_path):
  folder = fake_run(str(tmp_path / "run"), "translate_ende_wmt")
  with command_flags.command_module(
      DECODER, output_dir=folder, decode_hparams=ONE_SEARCH) as command:
    _, settled = command.run_flags.settled_decode("Decoding")
  assert settled.precision.requested == "auto"


def test_trainer_precision_follows_the_flag():
  with command_flags.command_module(
      "t2tlite.bin.t2t_trainer", mixed_precision="float32") as command:
    choice = command.precision_flags.chosen("Training")
  assert (choice.precision, choice.requested) == ("float32", "float32")


def test_export_precision_is_float32_or_bfloat16_float32_by_default():
  with command_flags.command_module(EXPORTER):
    flag = flags.FLAGS["mixed_precision"]
    assert flag.value == "float32"
    flag.parse("bfloat16")
    assert flag.value == "bfloat16"
    for wrong in ("float16", "auto"):
      with pytest.raises(flags.IllegalFlagValueError):
        flag.parse(wrong)


def test_checkpoint_path_names_the_checkpoint_loaded_in_its_precision(
    tmp_path_factory):
  folder = run_copy(tmp_path_factory)
  older = run_dir.latest_checkpoint(folder)
  model, _, _ = run_dir.load_trained_model(folder)
  newer = tf.train.CheckpointManager(
      run_dir.make_checkpoint(model), folder, max_to_keep=None).save(
          checkpoint_number=2)
  assert run_dir.latest_checkpoint(folder) == newer != older
  with command_flags.command_module(
      DECODER, output_dir=folder, checkpoint_path=older,
      decode_hparams=ONE_SEARCH, mixed_precision="bfloat16") as command:
    _, settled = command.run_flags.settled_decode("Decoding")
    run = command.run_flags.load_trained(settled)
  assert run.checkpoint == older
  assert run.model.dtype_policy.name == "mixed_bfloat16"


def write_export_metadata(path, parent=None):
  """An export folder's metadata as the exporter writes it: checkpoint
  /run/ckpt-7, greedy search, bfloat16."""
  metadata = {"checkpoint": "/run/ckpt-7", "precision": "bfloat16",
              "decode_hparams": vars(DecodeHParams(beam_size=1)),
              "parent": parent}
  os.makedirs(os.path.dirname(os.path.join(path, METADATA_FILE)))
  with open(os.path.join(path, METADATA_FILE), "w") as f:
    json.dump(metadata, f)


def test_export_line_names_checkpoint_precision_and_settings(tmp_path):
  path = str(tmp_path / "export" / "3")
  write_export_metadata(path)
  with command_flags.command_module(EXPORTER) as command:
    line = command._exported(path)
  assert line == f"Exported /run/ckpt-7 in bfloat16 (greedy search) as {path}"


def test_export_line_names_the_checkpoint_a_run_warm_started_from(
    tmp_path):
  path = str(tmp_path / "export" / "1")
  write_export_metadata(path, parent={"path": "/base", "step": 500,
                                      "checkpoint": "/base/ckpt-500"})
  with command_flags.command_module(EXPORTER) as command:
    line = command._exported(path)
  assert line.endswith(
      f" as {path}; the run was warm-started from /base/ckpt-500")


def test_ctranslate2_export_without_its_package_is_a_command_error(
    tmp_path, monkeypatch):
  folder = fake_run(str(tmp_path / "run"), "translate_ende_wmt")
  monkeypatch.setitem(sys.modules, "ctranslate2", None)  # not installed
  with command_flags.command_module(
      EXPORTER, output_dir=folder, export_format="ctranslate2") as command:
    with pytest.raises(console.CommandError) as error:
      command._run()
  assert "pip install 't2tlite[ctranslate2]'" in str(error.value)
  assert not os.path.exists(os.path.join(folder, "ctranslate2"))


@pytest.mark.parametrize("settings, named", [
    ({"decode_hparams": "beam_size=2"}, "--decode_hparams=beam_size=2"),
    ({"mixed_precision": "bfloat16"}, "--mixed_precision=bfloat16")])
def test_ctranslate2_export_refuses_the_saved_models_settings(
    tmp_path, settings, named):
  folder = fake_run(str(tmp_path / "run"), "translate_ende_wmt")
  with command_flags.command_module(
      EXPORTER, output_dir=folder, export_format="ctranslate2",
      **settings) as command:
    with pytest.raises(console.CommandError) as error:
      command._run()
  assert str(error.value).startswith(
      f"{named}: not for --export_format=ctranslate2 (CTranslate2 takes")
  assert not os.path.exists(os.path.join(folder, "ctranslate2"))
