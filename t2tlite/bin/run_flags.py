"""Flags of the commands that read a training folder (t2t-decoder,
t2t-attention, t2t-exporter), which adopt this module's key flags."""
from absl import flags

from t2tlite.bin import common_flags, lazy
from t2tlite.decode.settings import DecodeHParams

problem_decoding = lazy.module("t2tlite.problem_decoding")
run_dir = lazy.module("t2tlite.run_dir")

flags.declare_key_flag("output_dir")
flags.DEFINE_string("checkpoint_path", None, "A checkpoint prefix (such as "
                    "OUTPUT_DIR/ckpt-100) or a folder of checkpoints (such "
                    "as OUTPUT_DIR/averaged); default: the newest in "
                    "--output_dir.")
flags.DEFINE_string("decode_hparams", "", "Comma-separated name=value: "
                    "beam_size (1 = greedy), alpha, extra_length, "
                    "min_length (tokens before EOS, at least), "
                    "no_repeat_ngram_size (n: no n-gram twice), batch_size, "
                    "return_beams, constrained (false: ignore the problem's "
                    "decoding constraint), int8 (true: the decoder's matmuls "
                    "in int8, faster on AVX2 CPUs, outputs change a little), "
                    "concurrent_searches (searches over parts of a batch run "
                    "side by side; 0: auto, 2 on a CPU with 2+ cores, where "
                    "t2t-decoder gives each cores/2 intra-op threads); "
                    "sampling_temperature (> 0: sample instead of "
                    "searching), top_k, top_p, sampling_seed, num_samples.")

FLAGS = flags.FLAGS


def load_trained(dtype=None):
  """(model, RunInfo, checkpoint path, DecodeHParams) from the flags; the
  decode hparams are the problem's defaults with --decode_hparams on top.
  `dtype` is the model's Keras dtype policy name (None: float32).
  Commands require --output_dir (console.run).

  Raises:
    ValueError: bad --decode_hparams.
    FileNotFoundError: not a training folder, or no checkpoint.
  """
  DecodeHParams.parse(FLAGS.decode_hparams)  # fail before loading
  common_flags.load_run_plugins(FLAGS.output_dir)
  model, info, path = run_dir.load_trained_model(
      FLAGS.output_dir, FLAGS.checkpoint_path, dtype=dtype)
  hp = problem_decoding.decode_hparams(info.problem, FLAGS.decode_hparams)
  return model, info, path, hp
