"""Flags of the commands that read a training folder (t2t-decoder,
t2t-attention, t2t-exporter), which adopt this module's key flags."""
from absl import flags

from t2tlite import precision
from t2tlite.bin import common_flags, lazy

machine = lazy.module("t2tlite.decode.machine")
problem_decoding = lazy.module("t2tlite.problem_decoding")
run_decoding = lazy.module("t2tlite.run_decoding")
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
                    "searching), top_k, top_p, epsilon (tokens less "
                    "probable are not drawn), sampling_seed, num_samples; "
                    "xla_lines (n: greedy and beam batches of at most n "
                    "lines search with XLA, a compile per shape, then up "
                    "to 2.5 times faster on small models' single lines).")

FLAGS = flags.FLAGS


def settled_decode(what):
  """(RunInfo, SettledDecode) from the flags, before any model loads: the
  problem's decode defaults with --decode_hparams on top (parsed here,
  once), settled for this machine (`machine.settle`): TensorFlow's
  intra-op threads set for the searches, int8 decided, --mixed_precision
  resolved and announced (`what` computes: "Decoding").
  Commands require --output_dir (console.run).

  Raises:
    ValueError: bad --decode_hparams.
    FileNotFoundError: not a training folder.
  """
  common_flags.load_run_plugins(FLAGS.output_dir)
  info = run_dir.read_run_info(FLAGS.output_dir)
  hp = problem_decoding.decode_hparams(info.problem, FLAGS.decode_hparams)
  settled = machine.settle(hp, FLAGS.mixed_precision, set_threads=True)
  precision.announce(settled.precision, what)
  return info, settled


def load_trained(settled):
  """The run the flags name (`run_decoding.LoadedRun`: --output_dir,
  --checkpoint_path, an ensemble when it names several), computing in the
  precision `settled` holds.

  Raises:
    FileNotFoundError: not a training folder, or no checkpoint.
    ValueError: ensemble members of different problems or vocabularies.
  """
  return run_decoding.load_run(FLAGS.output_dir, FLAGS.checkpoint_path,
                               dtype=settled.precision.keras_policy)
