"""The dev metric while training, through the installed commands: BLEU logged
at each evaluation equals t2t-decoder + t2t-bleu on the same checkpoint (the
best one, which t2t-decoder reads in OUTPUT_DIR/best); the best checkpoints
are kept there (--keep_best_checkpoints=2) and t2t-avg-checkpoints'
averaging averages them; the scores reach metrics.jsonl and TensorBoard."""
import json
import re

import pytest
import sacrebleu

from t2tlite.bin import console
from t2tlite.train import averaging

import tiny_translation
from train_helpers import command, read_scalars

HPARAMS = ("num_layers=1,d_model=64,d_ff=128,num_heads=2,d_k=32,d_v=32,"
           "batch_size=1024,warmup_steps=40,learning_rate_cooldown_steps=0,"
           "max_length=32")
SAMPLES = 40  # dev lines decoded at each evaluation
STEPS, EVERY = 80, 40


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory):
  """A short train_and_evaluate run of the tiny translation corpus:
  (tmp folder, data_dir, output_dir, the trainer's output)."""
  from t2tlite import problem
  tmp = tmp_path_factory.mktemp("dev_metric")
  raw = tiny_translation.write_corpus(tmp / "raw")
  data_dir, output_dir = tmp / "data", tmp / "train"
  # The data as `t2t-datagen --raw_data_dir=RAW --vocab_size=300` writes it.
  problem.get_problem("translate_ende_wmt").generate_data(
      str(data_dir), raw_data_dir=str(raw), vocab_size=300)
  output = command(
      "t2t-trainer", "--problem=translate_ende_wmt",
      "--hparams_set=transformer_tiny", f"--hparams={HPARAMS}",
      f"--data_dir={data_dir}", f"--output_dir={output_dir}",
      f"--train_steps={STEPS}", f"--local_eval_frequency={EVERY}",
      f"--eval_decode_samples={SAMPLES}", "--eval_steps=2",
      "--mixed_precision=float32", "--random_seed=1",
      "--keep_checkpoint_max=1", "--keep_best_checkpoints=2", timeout=600)
  return tmp, data_dir, output_dir, output


def _records(output_dir):
  return [json.loads(line) for line in
          (output_dir / "metrics.jsonl").read_text().splitlines()]


def _decode_and_bleu(tmp, data_dir, output_dir, checkpoint, name):
  """t2t-decoder on the first SAMPLES dev lines (logging at INFO, in absl's
  format: --verbosity given), then
  t2t-bleu: (cased sacreBLEU, tokenized cased BLEU as t2t-bleu prints them,
  the translations, t2t-decoder's output)."""
  source, reference = (tmp / f"dev.{name}.en", tmp / f"dev.{name}.de")
  for path, side in ((source, "inputs"), (reference, "targets")):
    lines = (data_dir / f"translate_ende_wmt-dev.{side}.txt").read_text(
        encoding="utf-8").splitlines()[:SAMPLES]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  out = tmp / f"dev.{name}.out.de"
  decoder = command("t2t-decoder", f"--output_dir={output_dir}",
                    f"--checkpoint_path={checkpoint}",
                    f"--decode_from_file={source}", f"--decode_to_file={out}",
                    "--mixed_precision=float32", "--verbosity=0")
  report = command("t2t-bleu", f"--translation={out}",
                   f"--reference={reference}")
  cased = float(re.search(r"^BLEU = ([\d.]+)", report, re.M).group(1))
  tokenized = float(re.search(r"tokenized BLEU .*: cased ([\d.]+)",
                              report).group(1))
  return cased, tokenized, out.read_text(encoding="utf-8"), decoder


@pytest.mark.timeout(900)
def test_logged_bleu_is_t2t_bleu_of_t2t_decoder_on_the_best(translation_run):
  tmp, data_dir, output_dir, output = translation_run
  records = _records(output_dir)
  assert [r["step"] for r in records] == [EVERY, STEPS]
  for record in records:
    assert set(record) >= {"step", "wall_time", "loss", "bleu",
                           "bleu_uncased", "bleu_tokenized",
                           "bleu_tokenized_uncased"}
  # max() takes the first of equal scores: on a tie the earlier step stays.
  best = max(records, key=lambda r: r["bleu"])
  cased, tokenized, translations, decoder = _decode_and_bleu(
      tmp, data_dir, output_dir, output_dir / "best", "best")
  assert f"Decoding with {output_dir / 'best'}/ckpt-{best['step']} " in \
      decoder
  # --verbosity brings back absl's prefix, which the commands' own short
  # log lines leave out (tests/end_to_end/test_first_run.py).
  assert re.search(r"^I\d{4} [\d:.]+ +\d+ t2t_decoder\.py:\d+\] Decoding "
                   r"with ", decoder, re.M), decoder[-3000:]
  # sacreBLEU itself on t2t-decoder's output, beside t2tlite's figures.
  references = (tmp / "dev.best.de").read_text(encoding="utf-8").splitlines()
  sacre = sacrebleu.corpus_bleu(translations.splitlines(), [references])
  assert sacre.score > 0, (
      "the comparisons need a model with some 4-grams right: "
      f"{sacre.format()}")
  assert best["bleu"] == pytest.approx(sacre.score, abs=1e-6)
  assert round(best["bleu"], 2) == cased
  assert round(best["bleu_tokenized"], 2) == tokenized
  for record in records:
    assert (f"dev bleu at step {record['step']}: {record['bleu']:.2f} ("
            in output)
  # TensorBoard's eval scalars hold the same figures.
  scalars = read_scalars(str(output_dir / "eval"))
  for record in records:
    assert scalars["bleu"][record["step"]] == pytest.approx(record["bleu"],
                                                            abs=1e-3)


@pytest.mark.timeout(900)
def test_best_checkpoints_survive_pruning_and_average(translation_run):
  _, _, output_dir, _ = translation_run
  records = _records(output_dir)
  best = max(records, key=lambda r: r["bleu"])
  kept = json.loads((output_dir / "best" / "best.json").read_text())
  assert kept["step"] == best["step"] and kept["value"] == best["bleu"]
  ranked = sorted(records, key=lambda r: (-r["bleu"], r["step"]))
  assert kept["kept"] == [{"step": r["step"], "value": r["bleu"],
                           "checkpoint": f"ckpt-{r['step']}"}
                          for r in ranked]
  assert sorted(p.name for p in (output_dir / "best").glob("*.index")) == [
      f"ckpt-{EVERY}.index", f"ckpt-{STEPS}.index"]
  # keep_checkpoint_max=1 pruned every other checkpoint of the run folder.
  assert [p.name for p in output_dir.glob("ckpt-*.index")] == [
      f"ckpt-{STEPS}.index"]
  # The two best, averaged as t2t-avg-checkpoints --checkpoint_path=BEST
  # does; asking for more is one line saying what to do (its error, the
  # arguments named as the command's flags: console.name_flags).
  best_dir = str(output_dir / "best")
  assert averaging.average_checkpoints(
      str(output_dir), 2, checkpoint_dir=best_dir) == str(
          output_dir / "averaged" / f"ckpt-{STEPS}")
  with pytest.raises(ValueError) as error:
    averaging.average_checkpoints(str(output_dir), 3, checkpoint_dir=best_dir)
  message = console.name_flags(str(error.value), ["n", "checkpoint_path"],
                               {"checkpoint_dir": "checkpoint_path"})
  assert "\n" not in message
  assert message.startswith(f"--n=3 but {best_dir} keeps only 2 checkpoints")
  assert "t2t-trainer --keep_best_checkpoints" in message
