"""The small commands' own work, run in this process: t2t-attention's checks
of --input and --target and its maps of each input, t2t-datagen's progress
lines and --data_dir check, t2t-parse-eval's --reference list and its
alignment with --prediction, t2t-report's --report_file, t2t-score's
checks of its files and its tagging of the source lines, t2t-serve's
limits and server from its flags and its check of the serving extra."""
import io
import os
import sys

from absl import app
import pytest

import command_flags
import train_helpers
from corpora import write_lines
from fake_export import fake_export
from run_folder import TINY, needs_multi30k
from shared_run import shared_run_folder
from t2tlite.bin import console


# t2t-attention


@pytest.mark.parametrize("inputs, targets", [
    (["Two dogs play.", "A man runs."], ["Zwei Hunde spielen."]),
    (["Two dogs play."], ["Zwei Hunde spielen.", "Ein Mann rennt."])])
def test_attention_wants_one_target_per_input(tmp_path, inputs, targets):
  with command_flags.command_module(
      "t2tlite.bin.t2t_attention", output_dir=str(tmp_path / "run"),
      plot_dir=str(tmp_path / "plots"), input=inputs,
      target=targets) as command:
    with pytest.raises(app.UsageError) as error:
      command._run()
  assert str(error.value) == (
      f"{len(inputs)} --input but {len(targets)} --target flags: give one "
      "--target per --input, or none.")


def test_attention_refuses_a_target_for_an_ensemble(tmp_path):
  # Refused before anything loads: the members need not exist.
  members = [str(tmp_path / "a"), str(tmp_path / "b")]
  with command_flags.command_module(
      "t2tlite.bin.t2t_attention", output_dir=members[0],
      checkpoint_path=",".join(members), plot_dir=str(tmp_path / "plots"),
      input=["Two dogs play."], target=["Zwei Hunde spielen."]) as command:
    with pytest.raises(app.UsageError) as error:
      command._run()
  assert str(error.value).startswith("--target is for one model")


@needs_multi30k
def test_attention_decodes_each_input_given_no_target(
    tmp_path_factory, tmp_path, capsys):
  sources = ["Two dogs play.", "A man runs."]
  with command_flags.command_module(
      "t2tlite.bin.t2t_attention",
      output_dir=shared_run_folder(tmp_path_factory),
      decode_hparams="beam_size=1,extra_length=2", input=sources,
      plot_dir=str(tmp_path)) as command:
    command._run()
  index = tmp_path / "index.html"
  assert capsys.readouterr().out == f"{index}\n"
  page = index.read_text(encoding="utf-8")
  for n, source in enumerate(sources, 1):
    assert f"<h2>Sentence {n}</h2><p>source: {source}<br>" in page
  pngs = [p for p in os.listdir(tmp_path) if p.endswith(".png")]
  # Per sentence: 3 kinds (encoder, decoder, encoder-decoder) x layers x
  # heads.
  assert len(pngs) == len(sources) * 3 * TINY.num_layers * TINY.num_heads


# t2t-datagen


class _Clock:
  """Stands for the `time` module: monotonic() is `now`."""

  def __init__(self, now):
    self.now = now

  def monotonic(self):
    return self.now


class _Terminal(io.StringIO):

  def isatty(self):
    return True


def _progress_lines(monkeypatch, calls):
  """What t2t-datagen's progress writes to stderr for `calls`, (seconds
  since it started, samples read) each, and its closing."""
  clock = _Clock(100.0)
  with command_flags.command_module("t2tlite.bin.t2t_datagen") as command:
    monkeypatch.setattr(command, "time", clock)
    progress = command._Progress()
    for seconds, samples in calls:
      clock.now = 100.0 + seconds
      progress("train", samples)
    progress.done()


def test_datagen_progress_off_a_terminal_is_a_line_each_30_seconds(
    monkeypatch, capsys):
  _progress_lines(monkeypatch, [(0.6, 5), (29.9, 10), (30, 1234),
                                (45, 2000), (60.5, 5000)])
  assert capsys.readouterr().err == ("  train: 1,234 samples read\n"
                                     "  train: 5,000 samples read\n")


def test_datagen_progress_on_a_terminal_rewrites_one_line(monkeypatch):
  terminal = _Terminal()
  monkeypatch.setattr(sys, "stderr", terminal)
  _progress_lines(monkeypatch, [(0.4, 3), (0.5, 7), (0.8, 8), (1.2, 9)])
  assert terminal.getvalue() == ("\r  train: 7 samples read"
                                 "\r  train: 9 samples read"
                                 "\r" + " " * 60 + "\r")


def test_datagen_refuses_a_data_dir_that_is_a_file(tmp_path):
  a_file = tmp_path / "data"
  a_file.write_text("")
  with command_flags.command_module(
      "t2tlite.bin.t2t_datagen", problem="translate_ende_wmt",
      data_dir=str(a_file),
      raw_data_dir=str(tmp_path / "missing")) as command:
    with pytest.raises(console.CommandError) as error:
      command._run()
  assert str(error.value).startswith(
      f"--data_dir={a_file} is a file; expected a folder")


# t2t-parse-eval

TREES = ["( (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)) )",
         "( (S (NP (NNP John)) (VP (VBZ runs)) (. .)) )",
         "( (S (NP (PRP He)) (VP (VBD left)) (. .)) )"]
# Right for the first two trees; the third attaches "left" to the NP.
PREDICTIONS = ["(S (NP XX XX )NP (VP XX )VP XX )S",
               "(S (NP XX )NP (VP XX )VP XX )S",
               "(S (NP XX XX )NP XX )S"]


def test_parse_eval_reads_each_reference_part_in_order(tmp_path):
  first = write_lines(tmp_path / "a.mrg", TREES[:1])
  second = [write_lines(tmp_path / f"b{n}.mrg", [tree])
            for n, tree in enumerate(TREES[1:], 1)]
  with command_flags.command_module("t2tlite.bin.t2t_parse_eval") as command:
    # Spaces after commas and an empty part are allowed.
    assert command.reference_paths(
        f"{first}, {tmp_path}/b*.mrg,") == [first] + second
    missing = f"{tmp_path}/c*.mrg"
    with pytest.raises(FileNotFoundError) as error:
      command.reference_paths(f"{first},{missing}")
  assert str(error.value) == f"--reference: {missing} matches no file"


def test_parse_eval_expands_the_home_of_each_reference_part(tmp_path,
                                                           monkeypatch):
  monkeypatch.setenv("HOME", str(tmp_path))
  paths = [write_lines(tmp_path / f"{n}.mrg", [tree])
           for n, tree in enumerate(TREES[:2])]
  with command_flags.command_module("t2tlite.bin.t2t_parse_eval") as command:
    assert command.reference_paths("~/0.mrg, ~/1*.mrg") == paths


def test_parse_eval_scores_predictions_against_every_reference_file(
    tmp_path, capsys):
  prediction = write_lines(tmp_path / "pred.txt", PREDICTIONS)
  reference = ",".join(write_lines(tmp_path / f"{n}.mrg", [tree])
                       for n, tree in enumerate(TREES))
  with command_flags.command_module(
      "t2tlite.bin.t2t_parse_eval", prediction=prediction,
      reference=reference) as command:
    command._run()
  # Brackets: gold 3 + 3 + 3, predicted 3 + 3 + 2, matched 3 + 3 + 1.
  # P = 7/8, R = 7/9, F1 = 14/17.
  assert capsys.readouterr().out.startswith(
      "Bracketing F1 = 82.35 (precision 87.50, recall 77.78")


@pytest.mark.parametrize("predicted", [2, 4])
def test_parse_eval_wants_a_prediction_per_tree(tmp_path, predicted):
  prediction = write_lines(tmp_path / "pred.txt", (PREDICTIONS * 2)[:predicted])
  with command_flags.command_module(
      "t2tlite.bin.t2t_parse_eval", prediction=prediction,
      reference=write_lines(tmp_path / "gold.mrg", TREES)) as command:
    with pytest.raises(ValueError) as error:
      command._run()
  assert str(error.value).startswith(
      f"--prediction={prediction} has {predicted} lines but --reference "
      "holds 3 trees")


def test_parse_eval_names_the_flag_of_a_malformed_reference(tmp_path):
  prediction = tmp_path / "pred.txt"
  prediction.write_text("(S NN )S\n")
  gold = tmp_path / "gold.mrg"
  gold.write_text("(S (NN a))\n(S (NN b)")
  with command_flags.command_module(
      "t2tlite.bin.t2t_parse_eval", prediction=str(prediction),
      reference=str(gold)) as command:
    with pytest.raises(ValueError) as error:
      command._run()
  assert str(error.value).startswith(
      f"--reference: {gold}: tree 2 (line 2): ")


# t2t-report


def test_report_is_written_where_report_file_says(tmp_path, capsys):
  run = tmp_path / "run"
  run.mkdir()
  (run / "hparams.json").write_text('{"d_model": 32}')
  page = tmp_path / "page.html"
  with command_flags.command_module(
      "t2tlite.bin.t2t_report", output_dir=str(run),
      report_file=str(page)) as command:
    command._run()
  assert capsys.readouterr().out == f"{page}\n"
  assert "d_model" in page.read_text(encoding="utf-8")
  assert os.listdir(run) == ["hparams.json"]


# t2t-score


def _score_pairs(tmp_path, sources, targets, scores_file=None):
  """t2t-score's `_read_pairs` of files of these lines."""
  source = write_lines(tmp_path / "s", sources)
  target = write_lines(tmp_path / "t", targets)
  with command_flags.command_module(
      "t2tlite.bin.t2t_score", source_file=source, target_file=target,
      scores_file=scores_file or str(tmp_path / "scores")) as command:
    return command._read_pairs()


@pytest.mark.parametrize("sources, targets", [(2, 3), (3, 2)])
def test_score_wants_a_target_line_per_source_line(tmp_path, sources,
                                                   targets):
  with pytest.raises(ValueError) as error:
    _score_pairs(tmp_path, ["a"] * sources, ["x"] * targets)
  assert str(error.value).startswith(
      f"--source_file={tmp_path / 's'} has {sources} lines but "
      f"--target_file={tmp_path / 't'} has {targets}: ")


def test_score_names_an_empty_source_line(tmp_path):
  with pytest.raises(ValueError) as error:
    _score_pairs(tmp_path, ["a", " ", "c"], ["x", "y", "z"])
  assert str(error.value).startswith(
      f"--source_file={tmp_path / 's'} line 2 is empty")


def test_scores_file_may_be_in_the_working_folder_not_a_missing_one(
    tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert _score_pairs(tmp_path, ["a"], ["x"], "scores.txt") == (["a"],
                                                                ["x"])
  missing = str(tmp_path / "gone" / "scores.txt")
  with pytest.raises(FileNotFoundError) as error:
    _score_pairs(tmp_path, ["a"], ["x"], missing)
  assert str(error.value) == (
      f"--scores_file={missing}: folder {tmp_path / 'gone'} does not exist")


MIXTURE = {"de": "<2de>", "fr": "<2fr>"}


def test_score_tags_untagged_sources_with_the_target_language(tmp_path):
  source = str(tmp_path / "s")
  with command_flags.command_module(
      "t2tlite.bin.t2t_score", source_file=source,
      target_language="de") as command:
    # A line's own tag wins.
    assert command._tagged(["A dog.", "<2fr> A cat."], MIXTURE) == [
        "<2de> A dog.", "<2fr> A cat."]
  with command_flags.command_module(
      "t2tlite.bin.t2t_score", source_file=source) as command:
    assert command._tagged(["<2fr> A cat."], MIXTURE) == ["<2fr> A cat."]
    with pytest.raises(ValueError) as error:
      command._tagged(["<2fr> A cat.", "A dog."], MIXTURE)
  assert str(error.value).startswith(f"--source_file={source} line 2: ")


# t2t-serve


def test_serve_batch_flags_become_the_batchers_limits():
  with command_flags.command_module(
      "t2tlite.bin.t2t_serve", batch_window_ms=20.0, max_batch_lines=3,
      max_batch_tokens=90, max_queued_lines=7,
      request_timeout_secs=4.0) as command:
    limits = command._batch_limits()
  assert limits == command.BatchLimits(window_secs=0.02, max_lines=3,
                                       max_tokens=90, max_queued_lines=7,
                                       timeout_secs=4.0)


@pytest.mark.parametrize("port, valid", [(0, True), (65535, True),
                                         (65536, False), (-1, False)])
def test_serve_port_is_0_to_65535(port, valid):
  with command_flags.command_module("t2tlite.bin.t2t_serve",
                                    port=port) as command:
    if valid:
      assert command._limits().max_lines == command.FLAGS.max_lines
    else:
      with pytest.raises(ValueError, match=f"--port={port}: expected "):
        command._limits()


def _wsgi_app(environ, start_response):
  start_response("204 No Content", [])
  return []


@pytest.mark.parametrize("threads, expected", [(0, 7 + 3 + 8), (5, 5)])
def test_serve_listens_with_its_thread_and_connection_flags(threads,
                                                            expected):
  """0 threads: one per queued line and per line of a batch, and 8 more."""
  with command_flags.command_module(
      "t2tlite.bin.t2t_serve", host="127.0.0.1", port=0, threads=threads,
      max_queued_lines=7, max_batch_lines=3, max_connections=11) as command:
    server = command._listen(_wsgi_app, command._limits())
  try:
    assert server.adj.threads == expected
    assert server.adj.connection_limit == 11
    assert int(server.effective_port) > 0  # port 0: a free one
  finally:
    server.close()


@pytest.mark.parametrize("blocked", ["waitress", "flask",
                                     "prometheus_client"])
def test_serve_without_a_serving_package_names_the_extra(monkeypatch,
                                                         capsys, blocked):
  monkeypatch.setitem(sys.modules, blocked, None)  # its import fails
  with command_flags.command_module("t2tlite.bin.t2t_serve",
                                    model="/no/such/model") as command:
    assert command._run() == 2
  assert capsys.readouterr().err == (
      f"t2t-serve: error: the web server needs the serving extra ({blocked} "
      "is not installed): pip install 't2tlite[serving]'\n")


def test_serve_refuses_xla_lines_without_the_run_folder(tmp_path):
  gone = str(tmp_path / "gone" / "ckpt-1")
  version = fake_export(tmp_path / "export" / "1", gone)
  # At start, before it listens (on an address it could not take: a server
  # taking the flag would fail there, naming --host, not serve).
  with command_flags.command_module("t2tlite.bin.t2t_serve", model=version,
                                    xla_lines=1, host="256.0.0.1",
                                    port=0) as command:
    with pytest.raises(console.CommandError) as error:
      command._run()
  assert str(error.value) == (
      "--xla_lines=1: XLA's search needs the run folder the export came "
      f"from (its metadata names checkpoint {gone}, not found)")


def test_serve_exits_1_when_its_warm_up_fails(tmp_path):
  """A model that cannot load fails the warm-up: t2t-serve says so in one
  line and exits 1, rather than listening unready for ever."""
  # An export whose graph is empty.
  version = fake_export(tmp_path / "export" / "1",
                        str(tmp_path / "run" / "ckpt-1"))
  code, output = train_helpers.run(
      [train_helpers.console_script("t2t-serve"), f"--model={version}",
       "--port=0"], timeout=120)
  assert code == 1, output[-2000:]
  errors = [line for line in output.splitlines()
            if line.startswith("t2t-serve: error: ")]
  assert len(errors) == 1 and errors[0].startswith(
      "t2t-serve: error: warm-up failed: "), output[-2000:]
