"""The best checkpoints of a run by its dev metric, kept in OUTPUT_DIR/best,
and the per-evaluation log OUTPUT_DIR/metrics.jsonl.

    OUTPUT_DIR/best/
      ckpt-N.index, ckpt-N.data-*   copies of the kept checkpoints: the
                                    `keep` best (t2t-trainer's
                                    --keep_best_checkpoints, default 1)
      checkpoint                    model_checkpoint_path names the best, so
                                    --checkpoint_path=OUTPUT_DIR/best loads
                                    it; all_model_checkpoint_paths lists the
                                    kept ones worst first, best last (as a
                                    run folder lists oldest first, newest
                                    last), so averaging the last N of the
                                    folder averages the N best
      best.json                     the best: {"step", "metric", "value",
                                    "scores", "checkpoint"}, and "kept":
                                    [{"step", "value", "checkpoint"}] of
                                    every kept one, best first

Checkpoints rank by value, higher first; on a tie the earlier step ranks
first (a later step must be better to displace it).

The folder is outside the CheckpointManager's, so keep_checkpoint_max never
deletes it. A change is written into a temporary folder that then replaces
the old one by renames: a reader sees the old folder or the new one, whole.
Only the newly kept checkpoint is copied; the ones kept before are hard
links to the old folder's files (copies where the file system has none).
"""
import glob
import json
import os
import shutil

BEST_DIR = "best"
BEST_FILE = "best.json"
METRICS_FILE = "metrics.jsonl"


def read_best(output_dir):
  """best.json of the run ({"step", "metric", "value", "scores",
  "checkpoint", "kept"}) or None."""
  path = os.path.join(output_dir, BEST_DIR, BEST_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    return None


def kept_checkpoints(best):
  """The kept checkpoints of a best.json ([{"step", "value",
  "checkpoint"}], best first); [] for None. A best.json written before
  "kept" existed keeps its best alone."""
  if best is None:
    return []
  return best.get("kept") or [{key: best[key] for key in
                               ("step", "value", "checkpoint")}]


def ranked(kept, entry, keep):
  """`kept` (best first) with `entry` ({"step", "value", "checkpoint"})
  ranked among them, cut to the `keep` best. A kept entry of the same step
  is replaced (the step was scored again, after a resume)."""
  others = [e for e in kept if e["step"] != entry["step"]]
  order = sorted(others + [entry], key=lambda e: (-e["value"], e["step"]))
  return order[:keep]


def keep_best(output_dir, checkpoint_prefix, step, metric, value, scores,
              keep=1):
  """Keeps checkpoint `checkpoint_prefix` (".../ckpt-N", scored `value`)
  in OUTPUT_DIR/best if it ranks among the `keep` best so far, dropping
  the one it displaces.

  Returns:
    The prefix of its copy (OUTPUT_DIR/best/ckpt-N), or None when it does
    not rank among them (nothing is written then).
  """
  if keep < 1:
    raise ValueError(f"keep_best_checkpoints={keep}: expected at least 1")
  final = os.path.join(output_dir, BEST_DIR)
  old = read_best(output_dir)
  name = os.path.basename(checkpoint_prefix)
  entry = {"step": step, "value": value, "checkpoint": name}
  kept = ranked(kept_checkpoints(old), entry, keep)
  if not any(e is entry for e in kept):
    return None
  tmp = f"{final}.tmp-{os.getpid()}"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  for e in kept:
    if e is entry:
      _copy_checkpoint(checkpoint_prefix, tmp, shutil.copyfile)
    else:
      _copy_checkpoint(os.path.join(final, e["checkpoint"]), tmp, _link)
  _write_state(tmp, [e["checkpoint"] for e in kept])
  best = ({"step": step, "metric": metric, "value": value, "scores": scores,
           "checkpoint": name} if kept[0] is entry else
          {key: old[key] for key in ("step", "metric", "value", "scores",
                                     "checkpoint")})
  with open(os.path.join(tmp, BEST_FILE), "w", encoding="utf-8") as f:
    json.dump({**best, "kept": kept}, f, indent=2, sort_keys=True)
  previous = f"{final}.old-{os.getpid()}"
  if os.path.isdir(final):
    os.replace(final, previous)
  os.replace(tmp, final)
  shutil.rmtree(previous, ignore_errors=True)
  return os.path.join(final, name)


def _copy_checkpoint(prefix, folder, copy):
  """Puts the files of checkpoint `prefix` into `folder` with `copy(src,
  dst)`."""
  for path in [prefix + ".index",
               *glob.glob(glob.escape(prefix) + ".data-*")]:
    copy(path, os.path.join(folder, os.path.basename(path)))


def _link(source, destination):
  """A hard link (no bytes copied), or a copy where links are refused."""
  try:
    os.link(source, destination)
  except OSError:
    shutil.copyfile(source, destination)


def _write_state(folder, names):
  """The CheckpointState text file tf.train.latest_checkpoint reads:
  `names` best first; the best is model_checkpoint_path, and the list runs
  worst first, as averaging reads its end."""
  lines = [f'model_checkpoint_path: "{names[0]}"\n']
  lines += [f'all_model_checkpoint_paths: "{n}"\n' for n in reversed(names)]
  with open(os.path.join(folder, "checkpoint"), "w", encoding="utf-8") as f:
    f.write("".join(lines))


def append_metrics(output_dir, record):
  """Appends `record` as one JSON line to OUTPUT_DIR/metrics.jsonl (one
  write of a whole line to a file opened for appending, then fsync: a
  reader never sees half a line from a finished write)."""
  line = json.dumps(record, sort_keys=True) + "\n"
  path = os.path.join(output_dir, METRICS_FILE)
  with open(path, "a", encoding="utf-8") as f:
    f.write(line)
    f.flush()
    os.fsync(f.fileno())


def read_metrics(output_dir):
  """The records of OUTPUT_DIR/metrics.jsonl, oldest first ([] if none; a
  line cut short by a crash is skipped)."""
  records = []
  try:
    with open(os.path.join(output_dir, METRICS_FILE), encoding="utf-8") as f:
      for line in f:
        try:
          records.append(json.loads(line))
        except ValueError:
          continue
  except FileNotFoundError:
    pass
  return records


def evaluations_since_best(records, metric, best_step):
  """Evaluations of `metric` after step `best_step` (that did not improve
  on it): what --early_stopping_patience counts, also across a resume."""
  return sum(1 for r in records
             if metric in r and best_step is not None and
             r["step"] > best_step)
