"""Reading what a training run left in its output_dir, for t2t-report.

    run = collect("~/t2t_train/ende")

Each part is optional (a run that never evaluated has no eval curves; one
not started by t2t-trainer has no run.json): what is missing is None or
empty, never an error, except that the folder must hold something of a run.
"""
import dataclasses
import json
import os

from t2tlite.train.summaries import read_scalars

EVAL_SUBDIR = "eval"
METRICS_FILE = "metrics.jsonl"
EVAL_RESULTS_FILE = "eval_results.json"
# Checkpoint folders besides the run's own: t2t-avg-checkpoints' and the
# best checkpoint kept by the trainer.
CHECKPOINT_SUBDIRS = ("averaged", "best")


@dataclasses.dataclass
class Checkpoint:
  path: str        # the prefix, e.g. OUTPUT_DIR/ckpt-100
  step: int | None
  size_bytes: int  # its .index and .data files
  mtime: float
  kind: str        # "run", "averaged" or "best"


@dataclasses.dataclass
class Run:
  """Everything t2t-report shows.

  train, eval: {tag: [(step, value), ...] sorted by step} from the
    TensorBoard summaries (eval: OUTPUT_DIR/eval).
  metrics: the lines of OUTPUT_DIR/metrics.jsonl (dicts), in file order.
  """
  folder: str
  hparams: dict | None
  run_info: dict | None
  train: dict
  eval: dict
  metrics: list
  eval_results: dict | None
  checkpoints: list
  best_checkpoint: str | None   # the last one OUTPUT_DIR/best lists: the best
  best_info: dict | None        # a JSON file OUTPUT_DIR/best may hold


def _json(path):
  """The JSON in path, or None when it is absent.

  Raises:
    ValueError: it is not valid JSON (names the file).
  """
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    try:
      return json.load(f)
    except ValueError as error:
      raise ValueError(f"{path}: not valid JSON ({error})") from None


def _metrics_lines(path):
  """The JSON objects of metrics.jsonl ([] when absent); a bad line raises
  ValueError naming the file and line."""
  if not os.path.exists(path):
    return []
  rows = []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except ValueError:
        # The last line of a run still writing may be incomplete.
        if not line.endswith("\n"):
          break
        raise ValueError(f"{path}:{number}: not a JSON object") from None
      if not isinstance(row, dict):
        raise ValueError(f"{path}:{number}: expected a JSON object")
      rows.append(row)
  return rows


def _curves(folder):
  if not os.path.isdir(folder):
    return {}
  return {tag: sorted(values.items())
          for tag, values in read_scalars(folder).items()}


def _checkpoint_step(prefix):
  tail = prefix.rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else None


def _checkpoints_in(folder, kind):
  """Checkpoints listed by folder's 'checkpoint' file, oldest first."""
  import tensorflow as tf
  state = tf.train.get_checkpoint_state(folder) if os.path.isdir(
      folder) else None
  if state is None:
    return []
  found = []
  for path in state.all_model_checkpoint_paths or [
      state.model_checkpoint_path]:
    if not os.path.isabs(path):
      path = os.path.join(folder, path)
    parts = [os.path.join(os.path.dirname(path), name)
             for name in os.listdir(os.path.dirname(path))
             if name.startswith(os.path.basename(path) + ".")]
    if not parts:
      continue
    found.append(Checkpoint(
        path=path, step=_checkpoint_step(path),
        size_bytes=sum(os.path.getsize(p) for p in parts),
        mtime=max(os.path.getmtime(p) for p in parts), kind=kind))
  return found


def collect(folder):
  """The Run in `folder`.

  Raises:
    FileNotFoundError: folder holds neither hparams.json, summaries nor
      checkpoints (names it).
    ValueError: a malformed JSON file (names it).
  """
  folder = os.path.abspath(os.path.expanduser(folder))
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"output_dir={folder}: no such folder")
  checkpoints = _checkpoints_in(folder, "run")
  for sub in CHECKPOINT_SUBDIRS:
    checkpoints += _checkpoints_in(os.path.join(folder, sub), sub)
  best = [c for c in checkpoints if c.kind == "best"]
  best_dir = os.path.join(folder, "best")
  best_info = None
  if os.path.isdir(best_dir):
    for name in sorted(os.listdir(best_dir)):
      if name.endswith(".json"):
        best_info = _json(os.path.join(best_dir, name))
        break
  run = Run(folder=folder,
            hparams=_json(os.path.join(folder, "hparams.json")),
            run_info=_json(os.path.join(folder, "run.json")),
            train=_curves(folder),
            eval=_curves(os.path.join(folder, EVAL_SUBDIR)),
            metrics=_metrics_lines(os.path.join(folder, METRICS_FILE)),
            eval_results=_json(os.path.join(folder, EVAL_RESULTS_FILE)),
            checkpoints=checkpoints,
            best_checkpoint=best[-1].path if best else None,
            best_info=best_info)
  if not (run.hparams or run.train or run.checkpoints):
    raise FileNotFoundError(
        f"output_dir={folder}: not a training folder (no hparams.json, "
        "summaries or checkpoints)")
  return run
