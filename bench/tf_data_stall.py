"""tf.data's autotuning on (the pipelines before ba61188) and off
(`t2tlite/data/autotune.py`): the stall after a run's last evaluation, and
the training speed.

    python bench/tf_data_stall.py [--rounds 3]

Each round runs, alternating, one child per variant: a tiny t2t-trainer run
on algorithmic_reverse (30 steps with an evaluation every 10, then 200
steps without). One JSON line a run: "stall_s", the seconds from the last
evaluation's log line to the child's exit (it destroys its iterators in
between), and "steps_per_s", the trainer's last progress figure of the
200-step run. The machine's line first.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

LAST_EVALUATION = "dev exact_match at step"
TINY = ("--problem=algorithmic_reverse", "--hparams_set=transformer_tiny",
        "--random_seed=1")


def child(autotuned, argv):
  """In the child: t2t-trainer with argv, tf.data autotuned or not."""
  if autotuned:
    import tensorflow as tf
    from t2tlite.data import autotune
    autotune.off = tf.data.Options  # default options: autotuning on
    autotune.off_per_device = lambda: None
  from t2tlite.bin import t2t_trainer
  sys.argv = ["t2t-trainer", *argv]
  t2t_trainer.main()


def timed_run(autotuned, argv):
  """(seconds from the last evaluation line to exit, or None; the output)."""
  proc = subprocess.Popen(
      [sys.executable, __file__, "--child", str(int(autotuned)), *argv],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  last, lines = None, []
  for line in proc.stdout:
    lines.append(line)
    if LAST_EVALUATION in line:
      last = time.monotonic()
  proc.wait()
  if proc.returncode:
    raise RuntimeError("".join(lines[-30:]))
  return (None if last is None else time.monotonic() - last), lines


def steps_per_s(lines):
  rates = [line.split(" steps/s")[0].split()[-1] for line in lines
           if " steps/s" in line]
  return float(rates[-1]) if rates else None


def main():
  if len(sys.argv) > 2 and sys.argv[1] == "--child":
    child(sys.argv[2] == "1", sys.argv[3:])
    return
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args()
  from fingerprint import fingerprint  # bench/, this script's folder
  print(f"machine: {fingerprint()}", flush=True)
  with tempfile.TemporaryDirectory() as work:
    data = f"--data_dir={work}/data"
    subprocess.run([sys.executable, "-m", "t2tlite.bin.t2t_datagen",
                    "--problem=algorithmic_reverse", data], check=True,
                   capture_output=True)
    for round_number in range(args.rounds):
      for autotuned in (True, False):
        run = f"{work}/run{round_number}{int(autotuned)}"
        stall, _ = timed_run(autotuned, [
            *TINY, data, f"--output_dir={run}", "--train_steps=30",
            "--local_eval_frequency=10", "--eval_decode_samples=10"])
        _, lines = timed_run(autotuned, [
            *TINY, data, f"--output_dir={run}_speed", "--train_steps=200",
            "--schedule=train", "--log_step_count_steps=100"])
        print(json.dumps({"autotuned": autotuned, "round": round_number,
                          "stall_s": stall and round(stall, 2),
                          "steps_per_s": steps_per_s(lines),
                          "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
  main()
