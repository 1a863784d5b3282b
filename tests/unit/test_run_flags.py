"""The flags shared by the commands that read a training folder
(t2tlite.bin.run_flags) and --mixed_precision (precision_flags): how
--decode_hparams, --mixed_precision and --checkpoint_path become a
command's decode settings, compute precision and loaded checkpoint; and
t2t-exporter's own checks, the version folders it numbers and the line it
logs for an export; t2t-decoder's checks of its inputs, prefixes and target
language."""
import io
import json
import os
import sys

from absl import app
from absl import flags
from absl.testing import flagsaver
import pytest
import tensorflow as tf

from t2tlite import run_dir
from t2tlite.bin import console
from t2tlite.data import languages
from t2tlite.decode.settings import DecodeHParams
from t2tlite.export import exporter
from t2tlite.export.exporter import METADATA_FILE
import command_flags
from decode_helpers import decoder_of
from run_folder import TINY
from shared_run import run_copy, shared_trained_run

DECODER = "t2tlite.bin.t2t_decoder"
EXPORTER = "t2tlite.bin.t2t_exporter"
TRAINER = "t2tlite.bin.t2t_trainer"
PLUGINS = os.path.abspath("tests/support/plugins")
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


@pytest.mark.parametrize("settings, message", [
    ({"decode_hparams": "xla_lines=2"},
     "decode hparam xla_lines=2 is a Decoder's"),
    ({"checkpoint_path": "/a/ckpt-1,/b/ckpt-1"},
     "--checkpoint_path=/a/ckpt-1,/b/ckpt-1: an export holds one model")],
    ids=["decode_hparams", "checkpoint_path"])
def test_exporter_hands_its_flags_to_the_export(tmp_path, settings,
                                                message):
  # Both are refused before a model or checkpoint is looked for.
  folder = fake_run(str(tmp_path / "run"), "translate_ende_wmt")
  with command_flags.command_module(EXPORTER, output_dir=folder,
                                    **settings) as command:
    with pytest.raises(ValueError) as error:
      command._run()
  assert str(error.value).startswith(message)
  assert not os.path.exists(os.path.join(folder, "export"))


def digit_vocabulary(folder):
  """A sentencepiece vocabulary of one piece a digit."""
  from t2tlite.data import vocab as vocab_lib
  path = str(folder / "digits.model")
  vocab_lib.train_sentencepiece(
      lambda: iter(" ".join(str((i + j) % 10) for j in range(i % 9 + 1))
                   for i in range(50)), path, None, model_type="word")
  return vocab_lib.Vocabulary.from_file(path)


def test_export_versions_are_the_number_folders_and_the_next_is_past_all(
    tmp_path):
  export_dir = tmp_path / "export"
  assert exporter.versions(str(export_dir)) == []
  for name in ("temp-a", "temp-b"):
    (export_dir / name).mkdir(parents=True)
    (export_dir / name / "saved_model.pb").write_text(name)
  assert exporter._publish(str(export_dir / "temp-a"), str(export_dir)) == (
      str(export_dir / "1"))
  for version in (2, 9, 10):
    (export_dir / str(version)).mkdir()
    (export_dir / str(version) / "saved_model.pb").write_text("older")
  (export_dir / "\u00b2").mkdir()  # "²": a digit to str.isdigit, not int()
  # TF Serving serves the highest number: 10, not 9.
  assert exporter.versions(str(export_dir)) == [1, 2, 9, 10]
  assert exporter._publish(str(export_dir / "temp-b"), str(export_dir)) == (
      str(export_dir / "11"))
  assert (export_dir / "11" / "saved_model.pb").read_text() == "temp-b"
  assert sorted(os.listdir(export_dir)) == ["1", "10", "11", "2", "9",
                                            "\u00b2"]


def test_serving_ops_may_include_tensorflow_texts_sentencepiece(tmp_path):
  vocab = digit_vocabulary(tmp_path)
  module = tf.Module()
  module.vocab = vocab
  module.encode = tf.function(
      lambda lines: vocab.encode(lines).to_tensor(),
      input_signature=[tf.TensorSpec([None], tf.string)])
  path = str(tmp_path / "saved")
  tf.saved_model.save(module, path)
  ops = exporter.check_serving_ops(path)
  assert "SentencepieceTokenizeOp" in ops


def test_length_warning_names_the_first_line_longer_than_training(
    tmp_path, capsys):
  vocab = digit_vocabulary(tmp_path)
  with command_flags.command_module(DECODER) as command:
    # "1 2 3" and its EOS are 4 tokens, as long as the longest training
    # example: no warning.
    warning = command._LengthWarning(vocab, 4)
    warning.check(["1 2 3", "4", ""])
    assert capsys.readouterr().err == ""
    warning.check(["1", "1 2 3 4", "5", "1 2 3 4 5 6"])
    assert capsys.readouterr().err == (
        "t2t-decoder: warning: 2 input line(s) are longer than any training "
        "example (line 2: 5 tokens; the longest training example had 4, "
        "EOS included); their outputs are likely wrong.\n")
    warning.check(["1 2 3 4 5 6"])  # once only
    assert capsys.readouterr().err == ""


def test_decode_to_file_may_be_in_the_working_folder_not_a_missing_one(
    tmp_path, monkeypatch):
  source = tmp_path / "in.en"
  source.write_text("A dog.\n", encoding="utf-8")
  monkeypatch.chdir(tmp_path)
  missing = str(tmp_path / "gone" / "out.de")
  with command_flags.command_module(
      DECODER, decode_from_file=str(source),
      decode_to_file="out.de") as command:
    assert command._read_input() == (["A dog."], None)
    with flagsaver.flagsaver(decode_to_file=missing):
      with pytest.raises(FileNotFoundError) as error:
        command._read_input()
  assert str(error.value) == (
      f"--decode_to_file={missing}: folder {tmp_path / 'gone'} does not "
      "exist")


def test_decoder_refuses_a_problem_the_run_was_not_trained_on(tmp_path):
  folder = fake_run(str(tmp_path / "run"), "translate_ende_wmt")
  source = tmp_path / "in.en"
  source.write_text("A dog.\n", encoding="utf-8")
  with command_flags.command_module(
      DECODER, output_dir=folder, decode_from_file=str(source),
      problem="parsing_wsj", decode_hparams=ONE_SEARCH) as command:
    with pytest.raises(ValueError) as error:
      command._run()
  assert str(error.value) == (
      f"--problem=parsing_wsj, but {folder} was trained on "
      "translate_ende_wmt; leave --problem out to use the trained one.")


def test_decoder_wants_one_input_and_prefixes_only_from_a_file(tmp_path):
  source = tmp_path / "in.en"
  source.write_text("A dog.\n", encoding="utf-8")
  # Refused before the run folder is read: it need not exist.
  folder = str(tmp_path / "run")
  for given in ({}, {"decode_from_file": str(source),
                     "decode_interactive": True}):
    with command_flags.command_module(DECODER, output_dir=folder,
                                      **given) as command:
      with pytest.raises(app.UsageError) as error:
        command._run()
    assert str(error.value) == ("Give exactly one of --decode_from_file "
                                "and --decode_interactive.")
  with command_flags.command_module(
      DECODER, output_dir=folder, decode_interactive=True,
      target_prefix_file=str(source)) as command:
    with pytest.raises(app.UsageError) as error:
      command._run()
  assert str(error.value) == ("--target_prefix_file goes with "
                              "--decode_from_file (line i is input line "
                              "i's prefix).")


def test_decoder_refuses_a_target_language_its_run_does_not_know(tmp_path):
  folder = fake_run(str(tmp_path / "run"), "translate_ende_wmt")
  with command_flags.command_module(
      DECODER, output_dir=folder, decode_interactive=True,
      target_language="de", decode_hparams=ONE_SEARCH) as command:
    with pytest.raises(languages.LanguageError) as error:
      command._run()
  assert str(error.value) == (
      "target_language=de: this model was trained on one problem and knows "
      "no target languages; leave it out")


class _Terminal(io.StringIO):
  """Typed lines: standard input as a terminal gives them."""

  def isatty(self):
    return True


def _shared_decoder(tmp_path_factory, **hparams):
  """(Decoder of the session's shared tiny run, its Vocabulary)."""
  _, model, vocab = shared_trained_run(tmp_path_factory)
  return decoder_of(model, vocab, **hparams), vocab


def test_interactive_decoder_names_a_lines_language_error_and_reads_on(
    tmp_path_factory, monkeypatch, capsys):
  decoder, vocab = _shared_decoder(tmp_path_factory)
  # A model of two target languages: an untagged line without
  # --target_language is an error of that line only; the tagged line after
  # it is decoded.
  known = {"de": "<2de>", "fr": "<2fr>"}
  monkeypatch.setattr(sys, "stdin", _Terminal("A dog.\n<2de> A dog.\n"))
  with command_flags.command_module(DECODER) as command:
    command._decode_interactive(decoder, lambda text, source: text,
                                command._LengthWarning(vocab, 0), known)
  captured = capsys.readouterr()
  (output,), _ = decoder.decode_lines(["<2de> A dog."], progress=False)
  assert captured.out == output + "\n"
  # A prompt before each line read, the last met the end of the input.
  assert captured.err == (
      "> t2t-decoder: error: a target language is needed (target_language, "
      "or a tag such as <2de> starting the line): this model knows de, fr\n"
      "> > ")


def test_decoder_names_its_prefix_file_in_a_prefix_error(tmp_path_factory,
                                                         tmp_path):
  decoder, vocab = _shared_decoder(tmp_path_factory, extra_length=0)
  prefix_file = str(tmp_path / "prefixes.de")
  with command_flags.command_module(
      DECODER, target_prefix_file=prefix_file) as command:
    with pytest.raises(ValueError) as error:
      command._decode_file(decoder, None, ["A dog."],
                           ["Ein Hund läuft über eine grüne Wiese."],
                           command._LengthWarning(vocab, 0))
  assert str(error.value).startswith(
      f"--target_prefix_file={prefix_file}: target prefix 1 holds "), (
          str(error.value))


def saved_training(folder, problem, model="transformer", **recorded):
  """A run folder as t2t-trainer leaves it before its first checkpoint:
  run.json (with the `recorded` flags) and hparams.json."""
  fake_run(folder, problem)
  run_dir.write_run_info(folder, TINY, problem, 20,
                         os.path.join(folder, "source.model"),
                         flags=recorded, model=model)
  return folder


def test_trainer_restart_refuses_another_problem(tmp_path):
  folder = saved_training(str(tmp_path / "run"), "translate_ende_wmt",
                          data_dir=str(tmp_path / "data"))
  with command_flags.command_module(
      TRAINER, problem="algorithmic_reverse") as command:
    with pytest.raises(console.CommandError) as error:
      command._resolve_setup(folder)
  assert str(error.value) == (
      f"{folder} holds a run of --problem=translate_ende_wmt, not "
      "algorithmic_reverse; use another --output_dir.")


def test_trainer_restart_reads_run_json_but_a_given_data_dir_wins(
    tmp_path):
  saved_data, new_data = str(tmp_path / "data"), str(tmp_path / "moved")
  folder = saved_training(str(tmp_path / "run"), "translate_ende_wmt",
                          model="plugin_postnorm_transformer",
                          data_dir=saved_data, t2t_usr_dir=PLUGINS)
  with command_flags.command_module(TRAINER) as command:
    problem, model, hp, data_dir, saved = command._resolve_setup(folder)
    assert (problem.name, model, data_dir) == (
        "translate_ende_wmt", "plugin_postnorm_transformer", saved_data)
    assert hp.to_dict() == TINY.to_dict()
    assert saved["t2t_usr_dir"] == PLUGINS
    with flagsaver.flagsaver(data_dir=new_data):
      assert command._resolve_setup(folder)[3] == new_data
