r"""t2t-report: a training run as one HTML page.

    t2t-report --output_dir=~/t2t_train/ende     # writes OUTPUT_DIR/report.html

The page holds the hparams, the machine and precision (run.json), loss,
dev-metric, throughput and learning-rate curves (from the run's TensorBoard
summaries and OUTPUT_DIR/metrics.jsonl), the checkpoints and which is
best, and the evaluation results (eval_results.json). Plots are embedded
images: the file needs no network and no other file.
"""
from absl import flags

from t2tlite.bin import console

flags.DEFINE_string("output_dir", None, "The run folder (t2t-trainer's "
                    "--output_dir).")
flags.DEFINE_string("report_file", None, "Where the page goes (default: "
                    "OUTPUT_DIR/report.html).")

FLAGS = flags.FLAGS


def _run():
  from t2tlite.report import write_report
  print(write_report(FLAGS.output_dir, FLAGS.report_file))


def main():
  console.run(_run, __name__, required=["output_dir"],
              path_flags=["output_dir", "report_file"])


if __name__ == "__main__":
  main()
