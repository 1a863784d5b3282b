"""Where a training run's wall-clock time went, from t2t-trainer's log.

    python bench/run_timeline.py TRAIN_LOG [--wall_secs=S]

TRAIN_LOG is t2t-trainer's stderr (bench/real_data.sh keeps it). Prints one
JSON line: the time before the first step (the log's first line to "First
step done": model, pipeline, tracing, shuffle buffer), the dev evaluations
(their own "(N.Ns)" figures), the training steps (everything else between
the first and the last line: steps and checkpoint writes), the median
steps/s and tokens/s of the progress lines, and the real (non-padding)
source + target tokens a step against the 2 x batch_size padded slots a
step holds (every bucket pads both sides to its length, so
real / slots is the share of the step's work that is not padding).
`--wall_secs` (from /usr/bin/time) adds the time before the first log line
(Python and TensorFlow start-up) and after the last.
"""
import argparse
import datetime
import json
import re
import statistics

_STAMP = re.compile(r"^[IWE](\d{4}) (\d\d:\d\d:\d\d\.\d+)")
_PROGRESS = re.compile(r"step (\d+)/\d+ .* ([\d.]+) steps/s\s+(\d+) tokens/s")
_EVAL = re.compile(r"eval \S+ at step (\d+): .*nll ([\d.]+)\s+accuracy "
                   r"([\d.]+).*\(\d+ sequences, ([\d.]+)s\)")
_PADDED = re.compile(r"(\d+) x (\d+) padded tokens per replica")


def _seconds(match):
  clock = datetime.datetime.strptime(match.group(2), "%H:%M:%S.%f")
  day = int(match.group(1)[2:])  # MMDD: runs over midnight
  return day * 86400 + clock.hour * 3600 + clock.minute * 60 + (
      clock.second + clock.microsecond / 1e6)


def timeline(lines):
  """The run's time budget from its log lines (see the module docstring)."""
  stamps, first_step, evals, speeds, batch_tokens, saves = [], None, [], [], 0, 0
  for line in lines:
    stamp = _STAMP.match(line)
    if not stamp:
      continue
    stamps.append(_seconds(stamp))
    if "First step done" in line:
      first_step = stamps[-1]
    if (match := _EVAL.search(line)):
      evals.append({"step": int(match.group(1)), "nll": float(match.group(2)),
                    "accuracy": float(match.group(3)),
                    "secs": float(match.group(4))})
    if (match := _PROGRESS.search(line)):
      speeds.append((float(match.group(2)), float(match.group(3))))
    if (match := _PADDED.search(line)):
      batch_tokens = int(match.group(1)) * int(match.group(2))
    saves += "Saved checkpoint" in line
  if not stamps or first_step is None or not speeds:
    raise ValueError("not a t2t-trainer log with progress lines "
                     "(no 'First step done' or no 'step N/M' line)")
  logged = stamps[-1] - stamps[0]
  eval_secs = sum(e["secs"] for e in evals)
  steps_per_sec = statistics.median(s for s, _ in speeds[1:] or speeds)
  tokens_per_sec = statistics.median(t for _, t in speeds[1:] or speeds)
  real_per_step = tokens_per_sec / steps_per_sec
  return {
      "logged_secs": round(logged, 1),
      "before_first_step_secs": round(first_step - stamps[0], 1),
      "evaluations": len(evals),
      "evaluation_secs": round(eval_secs, 1),
      "training_secs": round(logged - (first_step - stamps[0]) - eval_secs, 1),
      "checkpoints_saved": saves,
      "median_steps_per_sec": steps_per_sec,
      "median_tokens_per_sec": tokens_per_sec,
      "real_tokens_per_step": round(real_per_step),
      "padded_slots_per_step": 2 * batch_tokens,
      "real_share_of_slots": round(real_per_step / (2 * batch_tokens), 3)
                             if batch_tokens else None,
      "dev_curve": evals,
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("train_log")
  parser.add_argument("--wall_secs", type=float, default=None,
                      help="the run's wall-clock time (/usr/bin/time)")
  args = parser.parse_args()
  try:
    with open(args.train_log, encoding="utf-8", errors="replace") as f:
      result = timeline(f)
  except (OSError, ValueError) as e:
    parser.error(f"{args.train_log}: {e}")
  if args.wall_secs is not None:
    result["wall_secs"] = args.wall_secs
    result["outside_log_secs"] = round(args.wall_secs - result["logged_secs"],
                                       1)
  print(json.dumps(result))


if __name__ == "__main__":
  main()
