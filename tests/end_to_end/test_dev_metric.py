"""The dev metric while training, through the installed commands: BLEU logged
at each evaluation equals t2t-decoder + t2t-bleu on the same checkpoint; the
best checkpoint is kept in OUTPUT_DIR/best and t2t-decoder reads it; the
scores reach metrics.jsonl and TensorBoard."""
import json
import re

import pytest

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
  tmp = tmp_path_factory.mktemp("dev_metric")
  raw = tiny_translation.write_corpus(tmp / "raw")
  data_dir, output_dir = tmp / "data", tmp / "train"
  command("t2t-datagen", "--problem=translate_ende_wmt",
          f"--data_dir={data_dir}", f"--raw_data_dir={raw}",
          "--vocab_size=300")
  output = command(
      "t2t-trainer", "--problem=translate_ende_wmt",
      "--hparams_set=transformer_tiny", f"--hparams={HPARAMS}",
      f"--data_dir={data_dir}", f"--output_dir={output_dir}",
      f"--train_steps={STEPS}", f"--local_eval_frequency={EVERY}",
      f"--eval_decode_samples={SAMPLES}", "--eval_steps=2",
      "--mixed_precision=float32", "--random_seed=1",
      "--keep_checkpoint_max=1", timeout=600)
  return tmp, data_dir, output_dir, output


def _records(output_dir):
  return [json.loads(line) for line in
          (output_dir / "metrics.jsonl").read_text().splitlines()]


def _decode_and_bleu(tmp, data_dir, output_dir, checkpoint, name):
  """t2t-decoder on the first SAMPLES dev lines, then t2t-bleu: (cased
  sacreBLEU, tokenized cased BLEU) as t2t-bleu prints them."""
  source, reference = (tmp / f"dev.{name}.en", tmp / f"dev.{name}.de")
  for path, side in ((source, "inputs"), (reference, "targets")):
    lines = (data_dir / f"translate_ende_wmt-dev.{side}.txt").read_text(
        encoding="utf-8").splitlines()[:SAMPLES]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  out = tmp / f"dev.{name}.out.de"
  command("t2t-decoder", f"--output_dir={output_dir}",
          f"--checkpoint_path={checkpoint}", f"--decode_from_file={source}",
          f"--decode_to_file={out}", "--mixed_precision=float32")
  report = command("t2t-bleu", f"--translation={out}",
                   f"--reference={reference}")
  cased = float(re.search(r"^BLEU = ([\d.]+)", report, re.M).group(1))
  tokenized = float(re.search(r"tokenized BLEU .*: cased ([\d.]+)",
                              report).group(1))
  return cased, tokenized, out.read_text(encoding="utf-8")


@pytest.mark.timeout(900)
def test_logged_bleu_is_t2t_bleu_of_t2t_decoder(translation_run):
  tmp, data_dir, output_dir, output = translation_run
  records = _records(output_dir)
  assert [r["step"] for r in records] == [EVERY, STEPS]
  last = records[-1]
  assert set(last) >= {"step", "wall_time", "loss", "bleu", "bleu_uncased",
                       "bleu_tokenized", "bleu_tokenized_uncased"}
  cased, tokenized, _ = _decode_and_bleu(tmp, data_dir, output_dir,
                                         output_dir / f"ckpt-{STEPS}", "last")
  assert last["bleu"] > 0, "the check needs a model that is not all wrong"
  assert round(last["bleu"], 2) == cased
  assert round(last["bleu_tokenized"], 2) == tokenized
  assert f"dev bleu {last['bleu']:.2f} (decoded)" in output
  # TensorBoard's eval scalars hold the same figures.
  scalars = read_scalars(str(output_dir / "eval"))
  assert scalars["bleu"][STEPS] == pytest.approx(last["bleu"], abs=1e-3)


@pytest.mark.timeout(900)
def test_best_checkpoint_survives_pruning_and_decodes(translation_run):
  tmp, data_dir, output_dir, _ = translation_run
  records = _records(output_dir)
  best = max(records, key=lambda r: r["bleu"])
  kept = json.loads((output_dir / "best" / "best.json").read_text())
  assert kept["step"] == best["step"] and kept["value"] == best["bleu"]
  assert (output_dir / "best" / f"ckpt-{best['step']}.index").exists()
  # keep_checkpoint_max=1 pruned every other checkpoint of the run folder.
  assert [p.name for p in output_dir.glob("ckpt-*.index")] == [
      f"ckpt-{STEPS}.index"]
  cased, _, _ = _decode_and_bleu(tmp, data_dir, output_dir,
                                 output_dir / "best", "best")
  assert cased == round(best["bleu"], 2)
