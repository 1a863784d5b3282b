"""t2t-attention: attention heatmaps of a trained model (paper appendix).

    t2t-attention --output_dir=~/t2t_train/ende --plot_dir=plots \
        --input="Two dogs play in the snow." [--target="Zwei Hunde ..."]

--input may be repeated (one --target per --input, or none: then each target
is the model's own output, decoded with --decode_hparams by the search
t2t-decoder runs: beam, greedy or sampled). Writes one PNG
per attention kind, layer and head, and PLOT_DIR/index.html showing them.
"""

from absl import app
from absl import flags

from t2tlite.bin import console, lazy
from t2tlite.bin import precision_flags, run_flags

# TensorFlow loads when these are first used, after the flags are parsed.
attention_plots = lazy.module("t2tlite.decode.attention_plots")
decoding = lazy.module("t2tlite.decode.decoding")
problem_decoding = lazy.module("t2tlite.problem_decoding")
vocab_lib = lazy.module("t2tlite.data.vocab")

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
  _, settled = run_flags.settled_decode("Attention")
  model, info, _ = run_flags.load_trained(settled)
  vocab = vocab_lib.Vocabulary.from_file(info.vocab_file)
  target_vocab = vocab_lib.Vocabulary.from_file(info.target_vocab_file)
  constraint = problem_decoding.decode_constraint(info.problem, vocab,
                                                 target_vocab, settled.hp)
  decoder = None
  maps = []
  for source, target in zip(FLAGS.input, targets):
    if target is not None:
      maps.append(attention_plots.attention_maps(
          model, vocab, source, target_vocab.encode_text(target), target,
          target_vocab))
      continue
    # The model's own output, from the search t2t-decoder runs.
    decoder = decoder or decoding.Decoder(model, vocab, settled, target_vocab,
                                          constraint)
    maps.extend(attention_plots.decoded_attention_maps(decoder, source))
  print(attention_plots.write_plots(maps, FLAGS.plot_dir))


def main():
  console.run(_run, __name__, required=["output_dir", "input", "plot_dir"],
              path_flags=["output_dir", "checkpoint_path", "plot_dir"])


if __name__ == "__main__":
  main()
