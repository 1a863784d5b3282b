"""Figures for sampling's neighbours: ensembles, scoring and CTranslate2, on
the short Multi30k EN->DE recipe of the test suite
(tests/support/multi30k_short.py), trained once here.

    python bench/decode_extras.py --work_dir=/tmp/extras [--reuse]

Prints the machine's fingerprint, then JSON lines:
  * "ensemble": sacreBLEU on Multi30k val (1,014 sentences, beam 4,
    t2t-decoder) of the last checkpoint, the one before it, both as an
    ensemble (--checkpoint_path=A,B) and their average (t2t-avg-checkpoints
    of the last 3, the recipe's model);
  * "speed": in this process, on the averaged model, float32, val: pairs/s
    of Scorer.score_lines (val sources with their references) beside
    sentences/s of Decoder.decode_lines (greedy and beam 4) and of the
    CTranslate2 export (greedy and beam 4, float32, same threads), each the
    best of --repeats alternated runs;
  * "ctranslate2_greedy": the test's check on the first 300 test2016
    sentences (identical lines, sacreBLEU of both).
--reuse keeps a run already trained in --work_dir.
"""
import argparse
import gzip
import json
import os
import pathlib
import sys
import time

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                       "tests", "support")
sys.path.insert(0, SUPPORT)


def read(path, limit=None):
  opener = gzip.open if str(path).endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f]
  return lines[:limit]


def write(path, lines):
  pathlib.Path(path).write_text("".join(x + "\n" for x in lines),
                                encoding="utf-8")
  return pathlib.Path(path)


def best_of(repeats, runs):
  """{name: best seconds} over `repeats` rounds, the runs alternated."""
  best = {}
  for _ in range(repeats):
    for name, run in runs.items():
      start = time.perf_counter()
      run()
      best[name] = min(best.get(name, 1e9), time.perf_counter() - start)
  return best


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--work_dir", required=True)
  parser.add_argument("--reuse", action="store_true")
  parser.add_argument("--repeats", type=int, default=2)
  args = parser.parse_args()
  import multi30k_short as recipe
  from corpora import SHARED_DATA
  from train_helpers import command
  from t2tlite import precision
  print("machine:", precision.fingerprint(), flush=True)

  work = pathlib.Path(args.work_dir)
  work.mkdir(parents=True, exist_ok=True)
  output_dir = work / "train"
  if not (args.reuse and (output_dir / "averaged").is_dir()):
    start = time.time()
    recipe.train_short_run(work, "de")
    print(json.dumps({"trained_s": round(time.time() - start)}), flush=True)
  raw = SHARED_DATA / "multi30k" / "raw"
  val_en, val_de = read(raw / "val.en.gz"), read(raw / "val.de.gz")
  source, reference = write(work / "val.en", val_en), work / "val.de"
  write(reference, val_de)

  import sacrebleu
  checkpoints = sorted(output_dir.glob("ckpt-*.index"),
                       key=lambda p: int(p.stem.split("-")[1]))
  last, before = (str(p.with_suffix("")) for p in checkpoints[-1:-3:-1])
  bleu = {}
  for name, path in (("last", last), ("before_last", before),
                     ("ensemble_last_two", f"{last},{before}"),
                     ("averaged_last_3", str(output_dir / "averaged"))):
    out = work / f"val.{name}.de"
    start = time.time()
    command("t2t-decoder", f"--output_dir={output_dir}",
            f"--checkpoint_path={path}",
            "--decode_hparams=beam_size=4,alpha=0.6,batch_size=64",
            f"--decode_from_file={source}", f"--decode_to_file={out}",
            "--mixed_precision=float32")
    bleu[name] = {"sacrebleu": round(sacrebleu.corpus_bleu(
        read(out), [val_de]).score, 2), "wall_s": round(time.time() - start)}
  print(json.dumps({"ensemble": bleu, "checkpoints": [last, before],
                    "set": "multi30k val, 1014 sentences, beam 4"}),
        flush=True)

  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.decoding import DecodeHParams, Decoder
  from t2tlite.decode.scoring import Scorer
  from t2tlite.export.ctranslate2 import export_ctranslate2, translate_lines
  model, info, _ = run_dir.load_trained_model(str(output_dir),
                                              str(output_dir / "averaged"))
  vocab = Vocabulary.from_file(info.vocab_file)
  ct2_dir = work / "ctranslate2"
  if not ct2_dir.is_dir():
    export_ctranslate2(str(output_dir), str(ct2_dir),
                       str(output_dir / "averaged"))
  scorer = Scorer(model, vocab)
  greedy = Decoder(model, vocab, DecodeHParams.parse(
      "beam_size=1,batch_size=64"))
  beam = Decoder(model, vocab, DecodeHParams.parse(
      "beam_size=4,alpha=0.6,batch_size=64"))
  runs = {
      "score_pairs": lambda: scorer.score_lines(val_en, val_de, 64),
      "t2tlite_greedy": lambda: greedy.decode_lines(val_en, progress=False),
      "t2tlite_beam4": lambda: beam.decode_lines(val_en, progress=False),
      "ctranslate2_greedy": lambda: translate_lines(
          str(ct2_dir), val_en, beam_size=1, batch_size=64),
      "ctranslate2_beam4": lambda: translate_lines(
          str(ct2_dir), val_en, beam_size=4, batch_size=64),
  }
  for run in runs.values():  # warm-up: tracing, loading
    run()
  seconds = best_of(args.repeats, runs)
  print(json.dumps({"speed": {
      name: {"seconds": round(s, 2), "per_s": round(len(val_en) / s, 1)}
      for name, s in seconds.items()},
      "set": "multi30k val, 1014 sentences (pairs for score_pairs)",
      "load_average": os.getloadavg()}), flush=True)

  test_source = recipe.first_lines(raw / "test_2016_flickr.en.gz",
                                   recipe.TEST_SENTENCES, work / "test.en")
  test_reference = recipe.first_lines(raw / "test_2016_flickr.de.gz",
                                      recipe.TEST_SENTENCES, work / "test.de")
  check_dir = work / "check"
  check_dir.mkdir(exist_ok=True)
  identical, ours, theirs = recipe.ctranslate2_greedy_check(
      output_dir, test_source, test_reference, check_dir)
  print(json.dumps({"ctranslate2_greedy": {
      "identical_lines": round(identical, 4), "t2t_decoder_sacrebleu":
      round(ours, 2), "ctranslate2_sacrebleu": round(theirs, 2)},
      "set": "first 300 test2016 sentences, greedy, float32"}), flush=True)


if __name__ == "__main__":
  main()
