"""bf16 mixed precision against float32: the training loss over the first
steps of a real run, with the seed-to-seed difference as the noise level.

    python bench/loss_curve.py --data_dir=D --problem=translate_ende_wmt \
        --hparams_set=transformer_small --hparams=batch_size=2048 \
        --steps=200 --work_dir=W

Trains three times with t2t-trainer from the same data: float32 with seed 1,
bfloat16 with seed 1 and float32 with seed 2, logging the loss (mean over
each --every steps) to TensorBoard summaries. Prints one JSON line per logged
step and a summary: the mean and largest |bf16 - fp32| against the same
figures for |fp32 seed 2 - fp32 seed 1|. bf16 is "within noise" when its
difference from fp32 is no larger than another seed's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from t2tlite.train.summaries import read_scalars

from fingerprint import fingerprint

RUNS = {"fp32_seed1": (["--mixed_precision=float32"], 1),
        "bf16_seed1": (["--mixed_precision=bfloat16"], 1),
        "fp32_seed2": (["--mixed_precision=float32"], 2)}


def train(args, name, extra, seed):
  output_dir = os.path.join(args.work_dir, name)
  subprocess.run(
      [sys.executable, "-m", "t2tlite.bin.t2t_trainer",
       f"--problem={args.problem}",
       f"--hparams_set={args.hparams_set}", f"--hparams={args.hparams}",
       f"--data_dir={args.data_dir}", f"--output_dir={output_dir}",
       f"--train_steps={args.steps}", "--schedule=train",
       f"--log_step_count_steps={args.every}", f"--random_seed={seed}",
       "--save_checkpoints_secs=100000", *extra], check=True)
  return read_scalars(output_dir)


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--data_dir", required=True)
  parser.add_argument("--problem", default="translate_ende_wmt")
  parser.add_argument("--hparams_set", default="transformer_small")
  parser.add_argument("--hparams", default="batch_size=2048")
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--every", type=int, default=10)
  parser.add_argument("--work_dir", required=True)
  args = parser.parse_args()
  print(f"machine: {fingerprint()}", flush=True)
  curves, speed = {}, {}
  for name, (extra, seed) in RUNS.items():
    scalars = train(args, name, extra, seed)
    curves[name] = scalars["loss"]
    speed[name] = statistics.median(scalars["tokens_per_sec"].values())
  steps = sorted(curves["fp32_seed1"])
  for step in steps:
    print(json.dumps({"step": step, **{name: round(curve[step], 4)
                                       for name, curve in curves.items()}}))
  base = curves["fp32_seed1"]
  bf16 = [abs(curves["bf16_seed1"][s] - base[s]) for s in steps]
  seed = [abs(curves["fp32_seed2"][s] - base[s]) for s in steps]
  print(json.dumps({
      "summary": "loss_curve", "problem": args.problem,
      "hparams_set": args.hparams_set, "hparams": args.hparams,
      "steps": args.steps, "every": args.every,
      "bf16_vs_fp32_mean_abs": round(statistics.mean(bf16), 4),
      "bf16_vs_fp32_max_abs": round(max(bf16), 4),
      "seed2_vs_seed1_mean_abs": round(statistics.mean(seed), 4),
      "seed2_vs_seed1_max_abs": round(max(seed), 4),
      "median_tokens_per_s": {k: round(v) for k, v in speed.items()},
      "loadavg": list(os.getloadavg()),
      "fingerprint": fingerprint()}))


if __name__ == "__main__":
  main()
