"""t2t-report's page from a collected run: each dev plot on one scale, the
evaluation results as named rows, no Python repr anywhere, the steps made
beside the hparams' train_steps. (The page in a browser, with its
screenshot: tests/end_to_end/test_web.py and test_first_run.py.)"""
import re

from t2tlite.report import collect, render
from t2tlite.train import summaries


def _run(**fields):
  values = dict(folder="/runs/r", hparams={"train_steps": 1000},
                run_info={"flags": {"train_minutes": 2.0,
                                    "precision": {"precision": "float32"},
                                    "extra": {"a": 1, "b": [2, 3]}},
                          "plan": {"train_steps": 737, "train_minutes": 2.0}},
                train={"loss": [(100, 2.0), (737, 0.6)]},
                eval={"accuracy": [(300, 0.6), (737, 0.99)],
                      "sequence_accuracy": [(300, 0.2), (737, 0.98)]},
                metrics=[{"step": 300, "exact_match": 20.0, "loss": 1.0},
                         {"step": 737, "exact_match": 98.8, "loss": 0.6}],
                eval_results={"metric": "exact_match", "exact_match": 98.8,
                              "scores": {"exact_match": 98.8},
                              "best_value": 98.8, "best_step": 737,
                              "accuracy": 0.99, "step": 737},
                checkpoints=[], best_checkpoint=None, best_info=None)
  values.update(fields)
  return collect.Run(**values)


def test_each_dev_plot_holds_one_scale():
  plots = render._metric_plots(_run())
  assert [(title, sorted(series)) for title, _, series in plots] == [
      ("Dev accuracy (teacher-forced)",
       ["dev accuracy", "dev sequence_accuracy"]),
      ("Dev exact_match", ["dev exact_match"])]


def test_one_evaluation_is_left_to_the_tables():
  run = _run(eval={"accuracy": [(737, 0.99)]},
             metrics=[{"step": 737, "exact_match": 98.8}])
  assert render._metric_plots(run) == []
  assert "One dev evaluation" in render.render(run)


def test_page_has_named_results_steps_made_and_no_repr():
  page = render.render(_run())
  assert not re.search(r"\{'|\{&#x27;|\[2, 3\]", page)
  assert "<td>--extra</td><td>a=1, b=2, 3</td>" in page
  assert ("<tr><td>exact_match</td><td>98.8</td></tr>"
          "<tr><td>best exact_match</td><td>98.8 at step 737</td></tr>") in page
  assert ("train_steps: 1000 in the hparams; this run made 737 steps, of "
          "the 737 planned for --train_minutes=2 (run.json).") in page
  assert "<section id='flags'><h2>Flags</h2>" in page
  # A planned run that has not saved or summarized a step yet.
  started = render.render(_run(train={}))
  assert ("train_steps: 1000 in the hparams; this run has no step yet, of "
          "the 737 planned") in started


def test_without_a_best_folder_the_lowest_dev_loss_checkpoint_is_best():
  checkpoints = [collect.Checkpoint(f"/runs/r/ckpt-{step}", step, 2**20,
                                    0.0, "run") for step in (300, 500, 737)]
  run = _run(checkpoints=checkpoints,
             metrics=[{"step": 300, "loss": 1.0}, {"step": 500, "loss": 0.4},
                      {"step": 737, "loss": 0.6}])
  section = render._checkpoints_section(run)
  assert ("Best: <code>/runs/r/ckpt-500</code> (of the kept checkpoints at "
          "an evaluated step, the lowest dev loss (0.4000))") in section
  assert section.count("<tr class='best'>") == 1
  assert "<tr class='best'><td>/runs/r/ckpt-500</td>" in section


def test_throughput_has_the_median_and_the_last_value():
  run = _run(train={"tokens_per_sec": [(100, 900.0), (200, 1200.0),
                                       (300, 1000.0), (400, 1100.0),
                                       (500, 950.0)]})
  assert render._throughput(run) == [["tokens per sec", "1000", "950", 5]]


def test_the_dev_metric_is_one_row_before_its_other_scores():
  results = {"metric": "bleu", "bleu": 30.1, "step": 900, "accuracy": 0.6,
             "scores": {"bleu": 30.1, "chrf": 55.0}, "chrf": 55.0,
             "zeta": 1}
  assert render._result_rows(results) == [
      ["bleu", 30.1], ["chrf", 55.0], ["accuracy", 0.6], ["step", 900],
      ["zeta", 1]]


def test_checkpoint_sizes_are_in_mib():
  checkpoint = collect.Checkpoint("/runs/r/ckpt-737", 737, 3 * 2**19, 0.0,
                                  "run")
  section = render._checkpoints_section(_run(checkpoints=[checkpoint]))
  assert "<td>1.50 MiB</td>" in section


def test_a_run_without_a_plan_shows_the_steps_made_if_not_train_steps():
  stopped = _run(run_info={})
  assert render._train_steps_text(stopped) == (
      "1000 in the hparams; this run made 737")
  finished = _run(run_info={}, train={"loss": [(500, 2.0), (1000, 0.6)]})
  assert render._train_steps_text(finished) == 1000


def test_a_metric_in_the_eval_summaries_is_plotted_from_them():
  """metrics.jsonl may hold fewer of its evaluations (a resumed run); a
  metric only in metrics.jsonl is plotted from it."""
  run = _run(eval={"bleu": [(100, 10.0), (200, 20.0), (300, 25.0)]},
             metrics=[{"step": 300, "bleu": 25.0, "chrf": 50.0}])
  assert render._metric_series(run) == {
      "dev bleu": [(100, 10.0), (200, 20.0), (300, 25.0)],
      "dev chrf": [(300, 50.0)]}


def test_dev_evaluations_are_rows_by_step():
  run = _run(eval={"accuracy": [(300, 0.6), (737, 0.99)]},
             metrics=[{"step": 500, "exact_match": 50.0, "split": "dev"},
                      {"step": 300, "exact_match": 20.0}])
  assert render._evaluations(run) == (
      [[300, "0.6", "20"], [500, "", "50"], [737, "0.99", ""]],
      ["step", "accuracy", "exact_match"])


def test_cell_text_is_html_escaped():
  run = _run(run_info={"flags": {"note": "<b>a & b</b>"}})
  assert render._flags_section(run) == (
      "<table><tr><td>--note</td><td>&lt;b&gt;a &amp; b&lt;/b&gt;</td>"
      "</tr></table>")


def test_an_averaged_checkpoint_is_not_scored_by_the_dev_loss_of_its_step():
  """The dev loss at a step is the run checkpoint's, not the average's."""
  checkpoints = [collect.Checkpoint(f"/runs/r/ckpt-{step}", step, 2**20,
                                    0.0, "run") for step in (300, 737)]
  checkpoints.append(collect.Checkpoint("/runs/r/averaged/ckpt-500", 500,
                                        2**20, 0.0, "averaged"))
  run = _run(checkpoints=checkpoints,
             metrics=[{"step": 300, "loss": 1.0}, {"step": 500, "loss": 0.4},
                      {"step": 737, "loss": 0.6}])
  assert render._best(run)[0] == "/runs/r/ckpt-737"


def test_the_report_reads_the_summaries_as_soon_as_they_are_written(
    tmp_path):
  writer = summaries.ScalarWriter(str(tmp_path))
  writer.write("", 100, {"loss": 2.5, "learning_rate": 0.5})
  writer.write("", 200, {"loss": 1.5, "learning_rate": 0.25})
  writer.write("eval", 200, {"accuracy": 0.75})
  run = collect.collect(str(tmp_path))
  assert run.train == {"loss": [(100, 2.5), (200, 1.5)],
                       "learning_rate": [(100, 0.5), (200, 0.25)]}
  assert run.eval == {"accuracy": [(200, 0.75)]}


def test_only_the_chief_writes_summaries(tmp_path):
  worker = tmp_path / "worker"
  summaries.ScalarWriter(str(worker), chief=False).write(
      "", 100, {"loss": 2.5})
  assert not worker.exists()
