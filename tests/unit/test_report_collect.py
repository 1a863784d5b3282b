"""t2t-report's reading of metrics.jsonl and of folders that are not runs."""
import pytest

from t2tlite.report import collect


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
