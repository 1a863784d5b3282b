"""t2t-report's reading of metrics.jsonl and of folders that are not runs."""
import pytest

from t2tlite.report import collect

from checkpoint_state import write_checkpoint_state


def test_metrics_lines_skip_a_last_line_still_being_written(tmp_path):
  path = tmp_path / "metrics.jsonl"
  path.write_text('{"step": 100, "loss": 2.5, "bleu": 10.1}\n\n'
                  '{"step": 200, "loss": 2.1, "bleu": 12.4}\n{"step": 3')
  assert collect._metrics_lines(str(path)) == [
      {"step": 100, "loss": 2.5, "bleu": 10.1},
      {"step": 200, "loss": 2.1, "bleu": 12.4}]
  assert collect._metrics_lines(str(tmp_path / "absent.jsonl")) == []


@pytest.mark.parametrize("text, message", [
    ('{"step": 1}\nnot json\n{"step": 2}\n', r"metrics.jsonl:2: not a JSON"),
    ('[1, 2]\n', r"metrics.jsonl:1: expected a JSON object"),
])
def test_metrics_lines_name_the_bad_line(tmp_path, text, message):
  path = tmp_path / "metrics.jsonl"
  path.write_text(text)
  with pytest.raises(ValueError, match=message):
    collect._metrics_lines(str(path))


def test_collect_names_a_folder_that_is_no_run(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such folder"):
    collect.collect(str(tmp_path / "absent"))
  with pytest.raises(FileNotFoundError, match="not a training folder"):
    collect.collect(str(tmp_path))
  (tmp_path / "eval_results.json").write_text("{broken")
  (tmp_path / "hparams.json").write_text("{}")
  with pytest.raises(ValueError, match="eval_results.json: not valid JSON"):
    collect.collect(str(tmp_path))


def _checkpoints(folder, sizes):
  """A checkpoint file listing `sizes` {prefix: (index, data) byte counts},
  oldest first, and the files themselves."""
  folder.mkdir(exist_ok=True)
  for prefix, (index, data) in sizes.items():
    (folder / f"{prefix}.index").write_bytes(b"i" * index)
    (folder / f"{prefix}.data-00000-of-00001").write_bytes(b"d" * data)
  write_checkpoint_state(folder, list(sizes))


def test_collect_lists_each_checkpoint_with_its_own_files(tmp_path):
  run_dir = tmp_path / "en-de"
  _checkpoints(run_dir, {"ckpt-1": (10, 20), "ckpt-10": (100, 200)})
  _checkpoints(run_dir / "best", {"ckpt-10": (1, 2), "ckpt-1": (3, 4)})
  (run_dir / "best" / "best.json").write_text('{"step": 1}')
  run = collect.collect(str(run_dir))
  assert [(c.path, c.step, c.size_bytes, c.kind)
          for c in run.checkpoints] == [
              (str(run_dir / "ckpt-1"), 1, 30, "run"),
              (str(run_dir / "ckpt-10"), 10, 300, "run"),
              (str(run_dir / "best" / "ckpt-10"), 10, 3, "best"),
              (str(run_dir / "best" / "ckpt-1"), 1, 7, "best")]
  # The best folder lists its best checkpoint last.
  assert run.best_checkpoint == str(run_dir / "best" / "ckpt-1")
  assert run.best_info == {"step": 1}


def test_a_checkpoints_step_is_its_names_last_number():
  assert collect._checkpoint_step("/runs/en-de/ckpt-1200") == 1200
  assert collect._checkpoint_step("/runs/en-de/model") is None
