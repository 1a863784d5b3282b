"""t2t-score on a small run folder (the SavedModel's score signature:
test_export.py)."""
import subprocess
import sys

import pytest

import t2tlite
from t2tlite.decode.scoring import PairScore, Scorer

import command_flags
from corpora import write_lines

from outputs_differ import assert_outputs_differ
from run_folder import multi30k_lines, needs_multi30k
from shared_run import shared_trained_run
from train_helpers import TINY_HPARAMS, user_env

pytestmark = needs_multi30k


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """The session's shared run (read only): (folder, model, vocab)."""
  return shared_trained_run(tmp_path_factory)


def pairs():
  sources = multi30k_lines("en", 5)
  targets = multi30k_lines("de", 5)
  return sources, targets


def run_score(*args):
  return subprocess.run([sys.executable, "-m", "t2tlite.bin.t2t_score",
                         *args], capture_output=True, text=True,
                        env=user_env(), timeout=180)


@pytest.mark.timeout(200)
def test_t2t_score_writes_scores_in_input_order(trained, tmp_path):
  folder, model, vocab = trained
  sources, targets = pairs()
  out = tmp_path / "scores.txt"
  run = run_score(f"--output_dir={folder}",
                  f"--source_file={write_lines(tmp_path / 's', sources)}",
                  f"--target_file={write_lines(tmp_path / 't', targets)}",
                  f"--scores_file={out}", "--per_token", "--batch_size=2")
  assert run.returncode == 0, run.stderr[-3000:]
  lines = out.read_text(encoding="utf-8").splitlines()
  expected = Scorer(model, vocab).score_lines(sources, targets)
  assert len(lines) == len(sources)
  assert_outputs_differ(lines, "score lines")
  for line, score, target in zip(lines, expected, targets):
    total, normalized, tokens = line.split("\t")
    tokens = [float(t) for t in tokens.split()]
    assert len(tokens) == len(vocab.encode_text(target))  # pieces + EOS
    assert float(total) == pytest.approx(score.total, abs=1e-3)
    assert float(normalized) == pytest.approx(score.total / len(tokens),
                                              abs=1e-4)
    assert tokens == pytest.approx(score.tokens, abs=1e-4)


@pytest.mark.timeout(200)
@pytest.mark.parametrize("targets, message", [
    (["a"] * 4, r"--source_file=\S+/s has 5 lines but --target_file=\S+/t "
                "has 4"),
    (["a", "b", "", "d", "e"], r"--target_file=\S+/t line 3 is empty"),
], ids=["different_lengths", "empty_line"])
def test_t2t_score_bad_pairs_fail_with_one_line(trained, tmp_path, targets,
                                                message):
  folder, _, _ = trained
  sources, _ = pairs()
  out = tmp_path / "scores.txt"
  run = run_score(f"--output_dir={folder}",
                  f"--source_file={write_lines(tmp_path / 's', sources)}",
                  f"--target_file={write_lines(tmp_path / 't', targets)}",
                  f"--scores_file={out}")
  assert run.returncode == 1
  error = run.stderr.strip().splitlines()[-1]
  assert error.startswith("t2t-score: error: ")
  assert __import__("re").search(message, error), error
  assert not out.exists()


def test_scores_line_holds_total_normalized_and_tokens():
  score = PairScore(total=-6.0, normalized=-2.0, tokens=[-1.0, -2.5, -2.5])
  with command_flags.command_module("t2tlite.bin.t2t_score") as command:
    assert command.format_line(score, per_token=False) == (
        "-6.000000\t-2.000000")
    assert command.format_line(score, per_token=True) == (
        "-6.000000\t-2.000000\t-1.000000 -2.500000 -2.500000")


def test_empty_pair_line_is_named_before_the_model_loads(tmp_path):
  source = write_lines(tmp_path / "s", ["a", "b", "c"])
  target = write_lines(tmp_path / "t", ["x", "   ", "z"])
  with command_flags.command_module(
      "t2tlite.bin.t2t_score", source_file=str(source),
      target_file=str(target), scores_file=str(tmp_path / "out")) as command:
    with pytest.raises(ValueError) as error:
      command._read_pairs()
    assert str(error.value).startswith(f"--target_file={target} line 2 is "
                                       "empty")
    write_lines(tmp_path / "t", ["x", "y", "z"])
    assert command._read_pairs() == (["a", "b", "c"], ["x", "y", "z"])


def test_learned_positions_limit_the_pair_length(tmp_path):
  hp = t2tlite.create_hparams("transformer_tiny", TINY_HPARAMS +
                              ",max_length=4,position_encoding=learned")
  model = t2tlite.build_model(hp, 20)
  target = str(tmp_path / "t")
  with command_flags.command_module(
      "t2tlite.bin.t2t_score", source_file=str(tmp_path / "s"),
      target_file=target) as command:
    # Four tokens (EOS included) fit; five do not.
    command._check_lengths(model, [[5, 6, 7, 1]], [[5, 6, 7, 1]])
    with pytest.raises(ValueError) as error:
      command._check_lengths(model, [[5, 1]], [[5, 1], [5, 6, 7, 8, 1]])
  assert str(error.value).startswith(
      f"--target_file={target} line 2 has 5 tokens (EOS included); this "
      "model has learned positions for at most 4")
