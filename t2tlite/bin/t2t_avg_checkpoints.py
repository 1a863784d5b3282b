r"""t2t-avg-checkpoints: averages N checkpoints of a run (section 6.1).

    t2t-avg-checkpoints --output_dir=~/t2t_train/ende --n=5
    t2t-avg-checkpoints --output_dir=~/t2t_train/ende \
        --checkpoint_path=~/t2t_train/ende/best --n=3

Averages the newest N checkpoints of --output_dir, or the last N a folder
named by --checkpoint_path lists: OUTPUT_DIR/best lists the best ones by the
dev metric (t2t-trainer --keep_best_checkpoints=N), so it averages the N
best. Writes OUTPUT_DIR/averaged/ckpt-STEP (model weights only, STEP the
highest averaged); decode or export it with
--checkpoint_path=OUTPUT_DIR/averaged.
"""

from absl import flags

from t2tlite.bin import common_flags
from t2tlite.bin import console

flags.declare_key_flag("output_dir")
flags.DEFINE_integer("n", 5, "How many checkpoints to average (the paper: "
                     "the newest 5 for base models, 20 for big ones).",
                     lower_bound=1)
flags.DEFINE_string("checkpoint_path", None, "Average the last N "
                    "checkpoints that this folder's 'checkpoint' file lists, "
                    "such as OUTPUT_DIR/best: its N best by the dev metric "
                    "(train with t2t-trainer --keep_best_checkpoints=N or "
                    "more). Default: --output_dir (its newest N).")

FLAGS = flags.FLAGS


def _run():
  from t2tlite.train import averaging
  common_flags.load_run_plugins(FLAGS.output_dir)
  print(averaging.average_checkpoints(FLAGS.output_dir, FLAGS.n,
                                      checkpoint_dir=FLAGS.checkpoint_path))


def main():
  console.run(_run, __name__, required=["output_dir"],
              path_flags=["output_dir", "checkpoint_path"],
              renamed={"checkpoint_dir": "checkpoint_path"})


if __name__ == "__main__":
  main()
