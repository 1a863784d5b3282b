"""The best checkpoint of a run by its dev metric, kept in OUTPUT_DIR/best,
and the per-evaluation log OUTPUT_DIR/metrics.jsonl.

    OUTPUT_DIR/best/
      ckpt-N.index, ckpt-N.data-*   a copy of the best checkpoint
      checkpoint                    so that the folder works as
                                    --checkpoint_path=OUTPUT_DIR/best
      best.json                     {"step", "metric", "value", "scores"}

The folder is outside the CheckpointManager's, so keep_checkpoint_max never
deletes it. A new best is copied into a temporary folder that then replaces
the old one by renames: a reader sees the old best or the new one, whole.
"""
import glob
import json
import os
import shutil

BEST_DIR = "best"
BEST_FILE = "best.json"
METRICS_FILE = "metrics.jsonl"


def read_best(output_dir):
  """best.json of the run ({"step", "metric", "value", "scores"}) or None."""
  path = os.path.join(output_dir, BEST_DIR, BEST_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    return None


def keep_best(output_dir, checkpoint_prefix, step, metric, value, scores):
  """Copies checkpoint `checkpoint_prefix` (".../ckpt-N") into
  OUTPUT_DIR/best, replacing the one there.

  Returns:
    The prefix of the copy (OUTPUT_DIR/best/ckpt-N).
  """
  name = os.path.basename(checkpoint_prefix)
  final = os.path.join(output_dir, BEST_DIR)
  tmp = f"{final}.tmp-{os.getpid()}"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  for path in [checkpoint_prefix + ".index",
               *glob.glob(glob.escape(checkpoint_prefix) + ".data-*")]:
    shutil.copyfile(path, os.path.join(tmp, os.path.basename(path)))
  # The CheckpointState text format tf.train.latest_checkpoint reads.
  with open(os.path.join(tmp, "checkpoint"), "w", encoding="utf-8") as f:
    f.write(f'model_checkpoint_path: "{name}"\n'
            f'all_model_checkpoint_paths: "{name}"\n')
  with open(os.path.join(tmp, BEST_FILE), "w", encoding="utf-8") as f:
    json.dump({"step": step, "metric": metric, "value": value,
               "scores": scores, "checkpoint": name}, f, indent=2,
              sort_keys=True)
  old = f"{final}.old-{os.getpid()}"
  if os.path.isdir(final):
    os.replace(final, old)
  os.replace(tmp, final)
  shutil.rmtree(old, ignore_errors=True)
  return os.path.join(final, name)


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
