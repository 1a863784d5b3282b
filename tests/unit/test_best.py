"""OUTPUT_DIR/best keeps the N best checkpoints by the dev metric
(`t2tlite.train.best`), on fake checkpoint files: their ranking (ties: the
earlier step stays), the 'checkpoint' file TensorFlow reads, best.json, the
hard links to checkpoints kept before, and a resume reading the folder back."""
import json
import os

import pytest
import tensorflow as tf

from t2tlite.train import best as best_lib


def _fake_checkpoint(output_dir, step):
  """A run folder's ckpt-STEP files, holding their step as text."""
  prefix = os.path.join(output_dir, f"ckpt-{step}")
  for suffix in (".index", ".data-00000-of-00001"):
    with open(prefix + suffix, "w") as f:
      f.write(f"{step}{suffix}")
  return prefix


def _keep(output_dir, step, value, keep):
  return best_lib.keep_best(str(output_dir),
                            _fake_checkpoint(str(output_dir), step), step,
                            "bleu", value, {"bleu": value, "chrf": step},
                            keep=keep)


def _files(folder):
  return sorted(p.name for p in folder.iterdir())


def test_ranked_orders_by_value_then_earlier_step():
  kept = [{"step": 20, "value": 7.0, "checkpoint": "ckpt-20"},
          {"step": 10, "value": 5.0, "checkpoint": "ckpt-10"}]
  tie = {"step": 30, "value": 7.0, "checkpoint": "ckpt-30"}
  assert [e["step"] for e in best_lib.ranked(kept, tie, 3)] == [20, 30, 10]
  assert [e["step"] for e in best_lib.ranked(kept, tie, 1)] == [20]
  better = {"step": 5, "value": 9.0, "checkpoint": "ckpt-5"}
  assert [e["step"] for e in best_lib.ranked(kept, better, 2)] == [5, 20]
  # The same step scored again replaces its entry.
  again = {"step": 10, "value": 8.0, "checkpoint": "ckpt-10"}
  assert best_lib.ranked(kept, again, 2) == [again, kept[0]]
  assert best_lib.ranked(kept, again, 3) == [again, kept[0]]
  worse = {"step": 20, "value": 1.0, "checkpoint": "ckpt-20"}
  assert best_lib.ranked(kept, worse, 2) == [kept[1], worse]


def test_patience_counts_the_evaluations_after_the_best():
  records = [{"step": 10, "bleu": 5.0}, {"step": 20, "bleu": 7.0},
             {"step": 30, "loss": 2.0}, {"step": 30, "bleu": 6.0},
             {"step": 40, "bleu": 6.5}]
  # After the best (step 20): steps 30 and 40 scored by the metric; the
  # best's own evaluation and records of other measures do not count.
  assert best_lib.evaluations_since_best(records, "bleu", 20) == 2
  assert best_lib.evaluations_since_best(records, "bleu", 40) == 0
  assert best_lib.evaluations_since_best(records, "bleu", None) == 0


def test_keeps_the_n_best_and_names_the_best_for_tensorflow(tmp_path):
  best_dir = tmp_path / "best"
  assert _keep(tmp_path, 10, 5.0, keep=2) == str(best_dir / "ckpt-10")
  assert _keep(tmp_path, 20, 7.0, keep=2) == str(best_dir / "ckpt-20")
  # Not the best, but better than step 10, which it displaces.
  assert _keep(tmp_path, 30, 6.0, keep=2) == str(best_dir / "ckpt-30")
  assert _files(best_dir) == [
      "best.json", "checkpoint", "ckpt-20.data-00000-of-00001",
      "ckpt-20.index", "ckpt-30.data-00000-of-00001", "ckpt-30.index"]
  # A tie with the best: the earlier step stays the best.
  assert _keep(tmp_path, 40, 7.0, keep=2) == str(best_dir / "ckpt-40")
  assert (best_dir / "ckpt-40.index").read_text() == "40.index"
  assert not (best_dir / "ckpt-30.index").exists()
  # --checkpoint_path=OUTPUT_DIR/best loads the best; averaging reads the
  # end of the list, so the list runs worst first.
  assert tf.train.latest_checkpoint(str(best_dir)) == str(best_dir /
                                                          "ckpt-20")
  state = tf.train.get_checkpoint_state(str(best_dir))
  assert list(state.all_model_checkpoint_paths) == [
      str(best_dir / "ckpt-40"), str(best_dir / "ckpt-20")]
  best = json.loads((best_dir / "best.json").read_text())
  assert best == {
      "step": 20, "metric": "bleu", "value": 7.0,
      "scores": {"bleu": 7.0, "chrf": 20}, "checkpoint": "ckpt-20",
      "kept": [{"step": 20, "value": 7.0, "checkpoint": "ckpt-20"},
               {"step": 40, "value": 7.0, "checkpoint": "ckpt-40"}]}
  assert not list(tmp_path.glob("best.*")), "no temporary folder is left"


def test_a_checkpoint_below_the_n_best_writes_nothing(tmp_path):
  _keep(tmp_path, 10, 5.0, keep=1)
  before = (tmp_path / "best").stat().st_ino
  assert _keep(tmp_path, 20, 4.0, keep=1) is None
  assert (tmp_path / "best").stat().st_ino == before
  assert _files(tmp_path / "best") == [
      "best.json", "checkpoint", "ckpt-10.data-00000-of-00001",
      "ckpt-10.index"]


def test_checkpoints_kept_before_are_linked_not_copied(tmp_path):
  _keep(tmp_path, 10, 5.0, keep=3)
  first = (tmp_path / "best" / "ckpt-10.data-00000-of-00001").stat()
  _keep(tmp_path, 20, 6.0, keep=3)
  again = (tmp_path / "best" / "ckpt-10.data-00000-of-00001").stat()
  assert again.st_ino == first.st_ino
  # The new one is a copy: the run folder may delete its own files.
  assert (tmp_path / "best" / "ckpt-20.index").stat().st_ino != (
      tmp_path / "ckpt-20.index").stat().st_ino


def test_where_links_are_refused_the_kept_checkpoints_are_copied(
    tmp_path, monkeypatch):
  _keep(tmp_path, 10, 5.0, keep=3)

  def refused(source, destination):
    raise OSError(18, "Invalid cross-device link")  # as another filesystem

  monkeypatch.setattr(os, "link", refused)
  _keep(tmp_path, 20, 6.0, keep=3)
  kept = tmp_path / "best" / "ckpt-10.data-00000-of-00001"
  assert kept.read_text() == "10.data-00000-of-00001"
  assert _files(tmp_path / "best") == [
      "best.json", "checkpoint", "ckpt-10.data-00000-of-00001",
      "ckpt-10.index", "ckpt-20.data-00000-of-00001", "ckpt-20.index"]


def test_a_resume_reads_the_kept_checkpoints_back(tmp_path):
  _keep(tmp_path, 10, 5.0, keep=2)
  _keep(tmp_path, 20, 3.0, keep=2)
  best = best_lib.read_best(str(tmp_path))
  assert best["step"] == 10 and best["scores"] == {"bleu": 5.0, "chrf": 10}
  assert [e["step"] for e in best_lib.kept_checkpoints(best)] == [10, 20]
  # A later process goes on from the folder: step 30 displaces step 20.
  _keep(tmp_path, 30, 4.0, keep=2)
  assert [e["step"] for e in best_lib.kept_checkpoints(
      best_lib.read_best(str(tmp_path)))] == [10, 30]
  assert best_lib.read_best(str(tmp_path / "none")) is None
  assert best_lib.kept_checkpoints(None) == []


def test_a_best_json_without_kept_keeps_its_best(tmp_path):
  """A best/ written before --keep_best_checkpoints: its one checkpoint."""
  _keep(tmp_path, 10, 5.0, keep=1)
  path = tmp_path / "best" / "best.json"
  old = json.loads(path.read_text())
  del old["kept"]
  path.write_text(json.dumps(old))
  assert best_lib.kept_checkpoints(old) == [
      {"step": 10, "value": 5.0, "checkpoint": "ckpt-10"}]
  _keep(tmp_path, 20, 6.0, keep=2)
  assert tf.train.latest_checkpoint(str(tmp_path / "best")) == str(
      tmp_path / "best" / "ckpt-20")
  assert (tmp_path / "best" / "ckpt-10.index").exists()


def test_keeping_no_checkpoint_is_refused_before_writing(tmp_path):
  with pytest.raises(ValueError, match="keep_best_checkpoints=0"):
    _keep(tmp_path, 10, 5.0, keep=0)
  assert not (tmp_path / "best").exists()


def test_metrics_accumulate_and_a_line_cut_short_is_skipped(tmp_path):
  first, second = {"step": 10, "bleu": 5.0}, {"step": 20, "bleu": 6.0}
  best_lib.append_metrics(str(tmp_path), first)
  best_lib.append_metrics(str(tmp_path), second)
  path = tmp_path / best_lib.METRICS_FILE
  assert path.read_text().count("\n") == 2
  with open(path, "a") as f:
    f.write('{"step": 30, "bl')  # a crash in the middle of a write
  assert best_lib.read_metrics(str(tmp_path)) == [first, second]
  assert best_lib.read_metrics(str(tmp_path / "none")) == []
