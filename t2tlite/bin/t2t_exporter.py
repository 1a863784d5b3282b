r"""t2t-exporter: writes a trained model as a SavedModel for TF Serving.

    t2t-exporter --output_dir=~/t2t_train/ende \
        [--checkpoint_path=~/t2t_train/ende/averaged] \
        [--export_dir=~/t2t_train/ende/export] \
        [--decode_hparams="beam_size=4,alpha=0.6"]

Writes EXPORT_DIR/<version>/ (the next integer; default EXPORT_DIR is
OUTPUT_DIR/export) and prints its path (and, on stderr, the checkpoint,
precision and decode settings it holds). The SavedModel takes raw UTF-8 text
(signature serving_default) or token ids (signature translate_ids); the
tokenizer and the beam search run inside the graph, with the decode hparams
fixed at export. Inputs longer than hparams.max_length tokens (EOS included)
are truncated. It computes in float32 unless --mixed_precision=bfloat16
(for servers with native bfloat16: GPUs of compute capability >= 8.0, CPUs
with avx512_bf16 or amx_bf16). Serve it with
`tensorflow_model_server --model_name=NAME --model_base_path=EXPORT_DIR`.

    t2t-exporter --output_dir=~/t2t_train/ende --export_format=ctranslate2 \
        [--export_dir=~/t2t_train/ende/ctranslate2]

writes the model for CTranslate2 instead (pip install 't2tlite[ctranslate2]'):
one folder (default OUTPUT_DIR/ctranslate2, which must not exist) with
CTranslate2's model files and the sentencepiece models that tokenize its
inputs and detokenize its outputs (docs/decoding.md). Decode hparams and
--mixed_precision do not apply, and are refused: CTranslate2 takes its
search settings when it translates and picks its compute type when it
loads the model.
"""

import json
import os

from absl import flags
from absl import logging

from t2tlite.bin import common_flags
from t2tlite.bin import console
from t2tlite.bin import lazy
from t2tlite.bin import precision_flags
from t2tlite.bin import run_flags
from t2tlite.decode.settings import DecodeHParams

describe = lazy.module("t2tlite.decode.describe")

# --output_dir, --checkpoint_path and --decode_hparams, as in t2t-decoder.
flags.adopt_module_key_flags(run_flags)
flags.DEFINE_string("export_dir", None, "Folder of the version folders "
                    "(TF Serving's --model_base_path); default "
                    "OUTPUT_DIR/export (OUTPUT_DIR/ctranslate2, a new "
                    "folder, with --export_format=ctranslate2).")

flags.DEFINE_enum("export_format", "saved_model",
                  ["saved_model", "ctranslate2"],
                  "saved_model: for TF Serving; ctranslate2: for "
                  "CTranslate2 (needs the ctranslate2 package).")

precision_flags.define_export_flag()
flags.declare_key_flag("mixed_precision")

FLAGS = flags.FLAGS


def _run():
  common_flags.load_run_plugins(FLAGS.output_dir)
  if FLAGS.export_format == "ctranslate2":
    _check_ctranslate2_flags()
    from t2tlite.export.ctranslate2 import export_ctranslate2
    try:
      print(export_ctranslate2(FLAGS.output_dir, export_dir=FLAGS.export_dir,
                               checkpoint_path=FLAGS.checkpoint_path))
    except ImportError as error:  # the optional extra is not installed
      raise console.CommandError(str(error)) from None
    return
  from t2tlite.export.exporter import export_saved_model
  path = export_saved_model(FLAGS.output_dir, export_dir=FLAGS.export_dir,
                            checkpoint_path=FLAGS.checkpoint_path,
                            decode_hparams=FLAGS.decode_hparams,
                            precision=FLAGS.mixed_precision)
  logging.info("%s", _exported(path))
  print(path)


def _check_ctranslate2_flags():
  """Refuses the SavedModel's settings, which a CTranslate2 model cannot
  hold (a user would expect them to apply)."""
  given = [f"--{name}={FLAGS[name].value}" for name in
           ("decode_hparams", "mixed_precision")
           if FLAGS[name].value and not FLAGS[name].using_default_value]
  if given:
    raise console.CommandError(
        f"{' and '.join(given)}: not for --export_format=ctranslate2 "
        "(CTranslate2 takes its search settings when it translates and "
        "its compute type when it loads the model; docs/decoding.md)")


def _exported(path):
  """What the SavedModel at `path` holds, from its metadata: "Exported
  CHECKPOINT in PRECISION (DECODE SETTINGS) as PATH", and the checkpoint a
  warm-started run started from."""
  from t2tlite.export.exporter import METADATA_FILE
  with open(os.path.join(path, METADATA_FILE), encoding="utf-8") as f:
    metadata = json.load(f)
  settings = describe.describe(
      DecodeHParams.from_record(metadata["decode_hparams"]))
  parent = metadata.get("parent")
  lineage = (f"; the run was warm-started from {parent['checkpoint']}"
             if parent else "")
  return (f"Exported {metadata['checkpoint']} in {metadata['precision']} "
          f"({settings}) as {path}{lineage}")


def main():
  console.run(_run, __name__, required=["output_dir"],
              path_flags=["output_dir", "checkpoint_path", "export_dir"])


if __name__ == "__main__":
  main()
