"""t2t-decoder and the batched text decoding behind it."""
import os
import subprocess
import sys

import pytest

from t2tlite import hardware
from t2tlite import precision
from t2tlite import run_decoding
from t2tlite.bin import console
from t2tlite.decode.decoding import Decoder
from t2tlite.decode.machine import settle
from t2tlite.decode.settings import DecodeHParams

import command_flags
import host
from outputs_differ import assert_outputs_differ
from run_folder import multi30k_lines, needs_multi30k
from shared_run import run_copy, shared_run_folder, shared_trained_run
from train_helpers import user_env

pytestmark = needs_multi30k


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """The session's shared run (read only): (folder, model, vocab)."""
  return shared_trained_run(tmp_path_factory)


def sample_lines():
  # Mixed lengths (so sorting reorders them) and empty lines.
  lines = multi30k_lines("en", 7)
  return [lines[0], "", lines[1][:20], lines[2], "   ", lines[3][:9],
          lines[4], ""]


@pytest.fixture(scope="module")
def beam_two(trained):
  """(Decoder of beam_size=2, extra_length=5, batch_size=3 in float32, its
  (outputs, scores) of sample_lines())."""
  _, model, vocab = trained
  hp = DecodeHParams(beam_size=2, extra_length=5, batch_size=3)
  decoder = Decoder(model, vocab, settle(hp))
  return decoder, decoder.decode_lines(sample_lines(), progress=False)


def test_outputs_follow_input_order_and_empty_lines_survive(beam_two):
  decoder, (outputs, scores) = beam_two
  lines = sample_lines()
  assert len(outputs) == len(lines)
  assert_outputs_differ(outputs)
  for i, line in enumerate(lines):
    if not line.strip():
      assert outputs[i] == "" and scores[i] == 0.0
      continue
    # The same sentence decoded alone gives the same output.
    alone, alone_score = decoder.decode_batch([line])
    assert outputs[i] == alone[0], i
    assert scores[i] == pytest.approx(alone_score[0], abs=1e-3)


def test_sampled_lines_do_not_depend_on_their_batch(trained):
  _, model, vocab = trained
  lines = sample_lines()
  hp = DecodeHParams(sampling_temperature=1.0, top_k=20, sampling_seed=5,
                     num_samples=2, extra_length=5, batch_size=3)
  decoder = Decoder(model, vocab, settle(hp))
  outputs, scores = decoder.decode_lines(lines, progress=False)
  assert outputs[1] == ["", ""] and scores[1] == [0.0, 0.0]
  assert_outputs_differ(outputs, "sampled outputs")
  for i, line in enumerate(lines):
    if line.strip():
      alone, alone_scores = decoder.decode_batch([line])
      assert outputs[i] == alone[0], i
      assert scores[i] == pytest.approx(alone_scores[0], abs=1e-3)


def decoder_command(*args):
  """t2t-decoder's command line, run as `python -m`."""
  return [sys.executable, "-m", "t2tlite.bin.t2t_decoder", *args]


def run_decoder(*args, stdin=None):
  return subprocess.run(decoder_command(*args), input=stdin,
                        capture_output=True, text=True, env=user_env())


@pytest.mark.timeout(180)
def test_t2t_decoder_file_to_file(trained, beam_two, tmp_path):
  folder, _, _ = trained
  lines = sample_lines()
  source = tmp_path / "in.en"
  source.write_text("\n".join(lines) + "\n", encoding="utf-8")
  target = tmp_path / "out.de"
  # float32, as the in-process decoder it is compared with.
  run = run_decoder(f"--output_dir={folder}", "--problem=translate_ende_wmt",
                    "--decode_hparams=beam_size=2,extra_length=5,batch_size=3",
                    f"--decode_from_file={source}",
                    f"--decode_to_file={target}", "--mixed_precision=float32")
  assert run.returncode == 0, run.stderr
  assert "Decoding computes in float32 (mixed_precision=float32)" in (
      run.stderr)
  # Auto: two concurrent searches on a CPU of 2+ cores, each on its share
  # of them; one search (and TensorFlow's threads) on one core or a GPU.
  threads_line = ("Decoding a batch as up to 2 concurrent searches (one a "
                  f"line when it has fewer), {host.cores() // 2} intra-op "
                  "thread(s) an op.")
  assert (threads_line in run.stderr) == (host.auto_searches() == 2), (
      run.stderr)
  written = target.read_text(encoding="utf-8").split("\n")
  assert written[-1] == "" and len(written) == len(lines) + 1
  # In process: the same searches, with TensorFlow's default threads.
  _, (expected, _) = beam_two
  assert_outputs_differ(expected)
  assert written[:-1] == expected
  assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


@pytest.mark.timeout(180)
def test_t2t_decoder_postprocess_gives_trees_of_the_input_words(
    tmp_path_factory, tmp_path):
  from t2tlite.data import trees
  folder = shared_run_folder(tmp_path_factory, problem="parsing_wsj")
  lines = ["The cat sat .", "", "Stocks rose sharply in heavy trading ."]
  source = tmp_path / "in.txt"
  source.write_text("\n".join(lines) + "\n", encoding="utf-8")
  target = tmp_path / "out.txt"
  # An untrained model: its output is rarely a tree; postprocess repairs it.
  # The override replaces parsing_wsj's beam 21 and input length + 300.
  run = run_decoder(f"--output_dir={folder}", f"--decode_from_file={source}",
                    f"--decode_to_file={target}", "--postprocess",
                    "--decode_hparams=beam_size=2,extra_length=8")
  assert run.returncode == 0, run.stderr
  # Without --mixed_precision, decoding chooses as the trainer does.
  # (The reason may hold a measured figure, which differs by process.)
  auto = precision.choose("auto")
  assert (f"Decoding computes in {auto.precision} (mixed_precision=auto): "
          f"{hardware.describe_device().summary()}") in run.stderr
  written = target.read_text(encoding="utf-8").splitlines()
  assert len(written) == 3 and written[1] == ""
  for line, words in ((written[0], lines[0]), (written[2], lines[2])):
    (tree,) = trees.parse_trees(line)
    assert tree.words() == words.split()


@pytest.mark.timeout(180)
def test_t2t_decoder_interactive(trained):
  folder, model, vocab = trained
  run = run_decoder(f"--output_dir={folder}", "--decode_interactive",
                    "--decode_hparams=beam_size=1,extra_length=3",
                    "--mixed_precision=float32",
                    stdin="A dog runs.\n\nTwo men.\n")
  assert run.returncode == 0, run.stderr
  printed = run.stdout.split("\n")
  # The module's Vocabulary, after other tests set a seed (which clears
  # TensorFlow's kernel cache; see BUILD_NOTES.md, "Separate target
  # vocabularies").
  greedy = Decoder(model, vocab,
                   settle(DecodeHParams(beam_size=1, extra_length=3)))
  expected, _ = greedy.decode_lines(["A dog runs.", "", "Two men."],
                                    progress=False)
  assert_outputs_differ(expected)
  assert printed == expected + [""]


def test_a_run_without_checkpoint_is_a_clear_error(tmp_path_factory):
  """t2t-decoder's error (the road it takes: run_decoding.load_run), with
  the argument named as the flag (console.name_flags); that a command
  prints such an error as one line, exit code 1, is
  test_t2t_decoder_target_prefix_file's."""
  folder = shared_run_folder(tmp_path_factory, checkpoint=False)
  with pytest.raises(FileNotFoundError) as error:
    run_decoding.load_run(folder)
  assert console.name_flags(str(error.value), ["output_dir"]).startswith(
      f"No checkpoint in --output_dir={folder}: ")


@pytest.fixture(scope="module")
def second_run(tmp_path_factory):
  """Another run folder of the same problem and vocabulary (other
  weights: seed 4), shared by the session (read only)."""
  return shared_run_folder(tmp_path_factory, seed=4)


@pytest.mark.timeout(180)
def test_t2t_decoder_decodes_with_an_ensemble_writing_every_beam(
    trained, second_run, tmp_path):
  """--checkpoint_path=A,B: the ensemble's search, as in this process; with
  return_beams=true the n best, best first, each line holding every beam
  and its score."""
  from t2tlite.decode.ensemble import Ensemble
  from t2tlite.run_dir import load_models
  folder, _, vocab = trained
  lines = ["A dog runs.", "", "Two men sit on a bench."]
  source = tmp_path / "in.en"
  source.write_text("\n".join(lines) + "\n", encoding="utf-8")
  target = tmp_path / "out.de"
  run = run_decoder(
      f"--output_dir={folder}", f"--checkpoint_path={folder},{second_run}",
      f"--decode_from_file={source}", f"--decode_to_file={target}",
      "--decode_hparams=beam_size=3,extra_length=4,return_beams=true",
      "--mixed_precision=float32")
  assert run.returncode == 0, run.stderr
  written = target.read_text(encoding="utf-8").splitlines()
  models, _, _ = load_models(folder, [folder, second_run])
  hp = DecodeHParams(beam_size=3, extra_length=4, return_beams=True)
  outputs, scores = Decoder(Ensemble(models), vocab, settle(hp)).decode_lines(
      lines, progress=False)
  assert len(written) == 3 and written[1] == ""  # empty input, empty line
  assert outputs[1] == ["", "", ""]
  assert_outputs_differ(outputs, "beams")
  for line, texts, beam_scores in zip(written[::2], outputs[::2],
                                      scores[::2]):
    assert list(beam_scores) == sorted(beam_scores, reverse=True)
    fields = line.split("\t")
    assert len(texts) == 3 and fields[0::2] == texts
    assert [float(f) for f in fields[1::2]] == pytest.approx(
        list(beam_scores), abs=1e-4)


@pytest.mark.timeout(180)
def test_ensemble_members_must_share_problem_and_vocabulary(
    trained, tmp_path_factory):
  """The error t2t-decoder prints for --checkpoint_path=A,B (console.name_
  flags names the flag), found before any model loads."""
  from t2tlite.data.vocab import train_sentencepiece
  from t2tlite.run_dir import load_models
  folder, _, _ = trained
  other = shared_run_folder(tmp_path_factory, problem="translate_enfr_wmt")
  with pytest.raises(ValueError) as error:
    run_decoding.load_run(folder, f"{folder},{other}")
  assert console.name_flags(str(error.value), ["checkpoint_path"]) == (
      f"--checkpoint_path: {other}/ckpt-1 was trained on problem "
      f"translate_enfr_wmt but {folder}/ckpt-1 on translate_ende_wmt; an "
      "ensemble needs one problem and vocabulary")
  # Same problem, another vocabulary.
  resized = run_copy(tmp_path_factory, "resized")
  train_sentencepiece(lambda: iter(multi30k_lines("en", 200)),
                      os.path.join(resized, "vocab.model"), 200)
  with pytest.raises(ValueError, match=r"the vocabulary of .*resized/ckpt-1 "
                     r"\(.*\) differs from that of"):
    load_models(folder, [folder, resized])


@pytest.mark.timeout(240)
def test_decoder_wants_one_prefix_a_line(trained):
  _, model, vocab = trained
  decoder = Decoder(model, vocab, settle(DecodeHParams(beam_size=1,
                                                       extra_length=4)))
  lines = multi30k_lines("en", 2)
  for decode in (decoder.decode_batch, decoder.decode_lines):
    with pytest.raises(ValueError, match="1 target prefixes for 2 lines: "
                       "expected one per line"):
      decode(lines, prefixes=["Ein"])


def test_t2t_decoder_target_prefix_file(trained, tmp_path):
  folder, _, _ = trained
  lines = ["A dog runs.", "", "Two men sit on a bench.", "A cat."]
  prefixes = ["Ein Hund", "", "", "Zwei"]
  source, prefix_file = tmp_path / "in.en", tmp_path / "prefix.de"
  source.write_text("\n".join(lines) + "\n", encoding="utf-8")
  prefix_file.write_text("\n".join(prefixes) + "\n", encoding="utf-8")
  decode = "--decode_hparams=sampling_temperature=0.7,sampling_seed=2"
  # One prefix a line, or a one-line error naming the flag: exit code 1,
  # no traceback. Both commands at once, each with its own prefix file.
  short_file = tmp_path / "short_prefix.de"
  short_file.write_text("Ein Hund\n", encoding="utf-8")
  runs = {"prefixes": [decode, f"--target_prefix_file={prefix_file}"],
          "short": [f"--target_prefix_file={short_file}"]}
  started = {key: subprocess.Popen(
      decoder_command(f"--output_dir={folder}",
                      f"--decode_from_file={source}", *args),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=user_env()) for key, args in runs.items()}
  results = {}
  try:
    for key, process in started.items():
      stdout, stderr = process.communicate(timeout=170)
      results[key] = (process.returncode, stdout, stderr)
  finally:
    for process in started.values():
      if process.poll() is None:
        process.kill()
  code, stdout, stderr = results["prefixes"]
  assert code == 0, stderr
  outputs = stdout.splitlines()
  assert outputs[0].startswith("Ein Hund") and outputs[1] == ""
  assert outputs[3].startswith("Zwei")
  code, _, stderr = results["short"]
  assert code == 1, stderr[-3000:]
  assert "Traceback" not in stderr
  assert stderr.strip().splitlines()[-1] == (
      f"t2t-decoder: error: --target_prefix_file={short_file}: 1 lines, "
      "expected one per --decode_from_file line (4)")


def test_output_line_of_beams_and_of_a_blank_input():
  def upper(text, source):
    assert source == "A dog."
    return text.upper()

  with command_flags.command_module("t2tlite.bin.t2t_decoder") as command:
    assert command._output_line("ein hund", -1.0, "A dog.", upper,
                                False) == "EIN HUND"
    # Every beam postprocessed, each followed by its score.
    assert command._output_line(["ein hund", "hund"], [-1.23456, -2.5],
                                "A dog.", upper, True) == (
        "EIN HUND\t-1.2346\tHUND\t-2.5000")
    # A blank input gives an empty line, not its (empty) beams.
    for blank in ("", "   "):
      assert command._output_line(["", ""], [0.0, 0.0], blank, upper,
                                  True) == ""


def test_read_input_wants_one_prefix_a_line(tmp_path):
  source, prefix_file = tmp_path / "in.en", tmp_path / "prefix.de"
  source.write_text("A dog.\nTwo men.\n", encoding="utf-8")
  prefix_file.write_text("Ein\n", encoding="utf-8")
  with command_flags.command_module(
      "t2tlite.bin.t2t_decoder", decode_from_file=str(source),
      target_prefix_file=str(prefix_file)) as command:
    with pytest.raises(ValueError) as error:
      command._read_input()
    assert str(error.value) == (
        f"--target_prefix_file={prefix_file}: 1 lines, expected one per "
        "--decode_from_file line (2)")
    prefix_file.write_text("Ein\n\n", encoding="utf-8")
    assert command._read_input() == (["A dog.", "Two men."], ["Ein", ""])
