"""t2t-attention: attention heatmaps of a trained model (paper appendix).

    t2t-attention --output_dir=~/t2t_train/ende --plot_dir=plots \
        --input="Two dogs play in the snow." [--target="Zwei Hunde ..."]

--input may be repeated (one --target per --input, or none: then each target
is the model's own output, decoded with --decode_hparams by the search
t2t-decoder runs: beam, greedy or sampled). --checkpoint_path=A,B,... (an
ensemble, as t2t-decoder's) shows each member's maps of the ensemble's own
output. Writes one PNG per attention kind, layer and head, and
PLOT_DIR/index.html showing them.
"""

from absl import app
from absl import flags

from t2tlite import files
from t2tlite.bin import console, lazy
from t2tlite.bin import precision_flags, run_flags

# TensorFlow loads when these are first used, after the flags are parsed.
attention_plots = lazy.module("t2tlite.decode.attention_plots")

flags.DEFINE_multi_string("input", None, "A source sentence (repeatable).")
flags.DEFINE_multi_string("target", None, "Its target sentence (repeatable, "
                          "aligned with --input); default: decode one.")
flags.DEFINE_string("plot_dir", None, "Folder for the PNG files and "
                    "index.html.")
flags.adopt_module_key_flags(run_flags)
precision_flags.define_compute_flag("the model (and its decoded targets)")
flags.declare_key_flag("mixed_precision")

FLAGS = flags.FLAGS


def _run():
  targets = FLAGS.target or [None] * len(FLAGS.input)
  if len(targets) != len(FLAGS.input):
    raise app.UsageError(f"{len(FLAGS.input)} --input but {len(targets)} "
                         "--target flags: give one --target per --input, or "
                         "none.")
  if FLAGS.target and files.split_ensemble(FLAGS.checkpoint_path,
                                           "checkpoint_path"):
    # An ensemble, refused before anything loads.
    raise app.UsageError("--target is for one model: an ensemble's maps are "
                         "of its own output (leave --target out).")
  _, settled = run_flags.settled_decode("Attention")
  run = run_flags.load_trained(settled)
  decoder = None
  maps = []
  for source, target in zip(FLAGS.input, targets):
    if target is not None:
      maps.append(attention_plots.attention_maps(
          run.model, run.vocab, source, run.target_vocab.encode_text(target),
          target, run.target_vocab))
      continue
    # The model's own output, from the search t2t-decoder runs (an
    # ensemble's: one set of maps per member).
    decoder = decoder or run.decoder(settled)
    each = attention_plots.decoded_attention_maps(decoder, source)
    if run.ensemble:
      each = [dict(m, member=i + 1) for i, m in enumerate(each)]
    maps.extend(each)
  print(attention_plots.write_plots(maps, FLAGS.plot_dir))


def main():
  console.run(_run, __name__, required=["output_dir", "input", "plot_dir"],
              path_flags=["output_dir", "checkpoint_path", "plot_dir"])


if __name__ == "__main__":
  main()
