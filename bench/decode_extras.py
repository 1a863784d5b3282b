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
    sentences/s of Decoder.decode_lines (greedy and beam 4; TensorFlow's
    default threads, 2 concurrent searches) and of the CTranslate2 export
    (greedy and beam 4, float32, 1 and 2 intra-op threads, the model loaded
    in each timed run), each the best of --repeats alternated runs;
  * "ctranslate2_greedy": the test's check on the first 300 test2016
    sentences (identical lines, sacreBLEU of both);
  * "seed_ensemble" (--parts=seeds): a second run of the recipe with
    --random_seed=2 on the first run's data (so one vocabulary), then the
    sacreBLEU on val of each seed's averaged model and of both as an
    ensemble (t2t-decoder --checkpoint_path=RUN1/averaged,RUN2).
--reuse keeps a run already trained in --work_dir; --parts picks what runs
(default checkpoints,speed,ctranslate2).
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
  parser.add_argument("--parts", default="checkpoints,speed,ctranslate2")
  args = parser.parse_args()
  parts = set(args.parts.split(","))
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

  def val_bleu(name, run, path):
    out = work / f"val.{name}.de"
    start = time.time()
    command("t2t-decoder", f"--output_dir={run}",
            f"--checkpoint_path={path}",
            "--decode_hparams=beam_size=4,alpha=0.6,batch_size=64",
            f"--decode_from_file={source}", f"--decode_to_file={out}",
            "--mixed_precision=float32")
    return {"sacrebleu": round(sacrebleu.corpus_bleu(
        read(out), [val_de]).score, 2), "wall_s": round(time.time() - start)}

  if "seeds" in parts:
    second = work / "seed2"
    if not (second / "averaged").is_dir():
      command("t2t-trainer", "--problem=translate_ende_wmt",
              "--hparams_set=transformer_tiny",
              f"--hparams={recipe.HPARAMS}", f"--data_dir={work / 'data'}",
              f"--output_dir={second}", f"--train_steps={recipe.TRAIN_STEPS}",
              "--schedule=train", "--save_checkpoints_secs=20",
              "--keep_checkpoint_max=3", "--random_seed=2",
              "--mixed_precision=float32", timeout=3000)
      command("t2t-avg-checkpoints", f"--output_dir={second}", "--n=3")
    first = output_dir / "averaged"
    bleu = {"seed1_averaged": val_bleu("seed1", output_dir, first),
            "seed2_averaged": val_bleu("seed2", second, second / "averaged"),
            "ensemble_seeds_1_2": val_bleu("seeds", output_dir,
                                           f"{first},{second / 'averaged'}")}
    print(json.dumps({"seed_ensemble": bleu,
                      "set": "multi30k val, 1014 sentences, beam 4"}),
          flush=True)
  if "checkpoints" not in parts:
    return speed_and_check(args, parts, work, output_dir, raw, val_en, val_de)
  checkpoints = sorted(output_dir.glob("ckpt-*.index"),
                       key=lambda p: int(p.stem.split("-")[1]))
  last, before = (str(p.with_suffix("")) for p in checkpoints[-1:-3:-1])
  bleu = {name: val_bleu(name, output_dir, path) for name, path in (
      ("last", last), ("before_last", before),
      ("ensemble_last_two", f"{last},{before}"),
      ("averaged_last_3", str(output_dir / "averaged")))}
  print(json.dumps({"ensemble": bleu, "checkpoints": [last, before],
                    "set": "multi30k val, 1014 sentences, beam 4"}),
        flush=True)
  speed_and_check(args, parts, work, output_dir, raw, val_en, val_de)


def speed_and_check(args, parts, work, output_dir, raw, val_en, val_de):
  """The "speed" and "ctranslate2_greedy" lines, as --parts asks."""
  import multi30k_short as recipe

  from t2tlite import run_dir
  from t2tlite.data.vocab import Vocabulary
  from t2tlite.decode.decoding import DecodeHParams, Decoder
  from t2tlite.decode.scoring import Scorer
  from t2tlite.export.ctranslate2 import export_ctranslate2, translate_lines
  model, info, _ = run_dir.load_trained_model(str(output_dir),
                                              str(output_dir / "averaged"))
  vocab = Vocabulary.from_file(info.vocab_file)
  if "speed" not in parts:
    return ct2_check(parts, work, output_dir, raw)
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
  }
  for threads in (1, 2):
    for size in (1, 4):
      runs[f"ctranslate2_{'greedy' if size == 1 else 'beam4'}_{threads}"
           "thread"] = (lambda size=size, threads=threads: translate_lines(
               str(ct2_dir), val_en, beam_size=size, batch_size=64,
               intra_threads=threads))
  for run in runs.values():  # warm-up: tracing, loading
    run()
  seconds = best_of(args.repeats, runs)
  print(json.dumps({"speed": {
      name: {"seconds": round(s, 2), "per_s": round(len(val_en) / s, 1)}
      for name, s in seconds.items()},
      "set": "multi30k val, 1014 sentences (pairs for score_pairs)",
      "load_average": os.getloadavg()}), flush=True)
  ct2_check(parts, work, output_dir, raw)


def ct2_check(parts, work, output_dir, raw):
  import multi30k_short as recipe
  if "ctranslate2" not in parts:
    return
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
