"""Flags shared by the t2t-* commands, and plugin loading.

Each shared flag is defined once, here (or, for the flags of commands that
read a trained run, in run_flags.py, which imports this module), so that the
order in which a command imports flag modules never matters. Library code
receives values as arguments.
"""
import os

from absl import flags

from t2tlite import registry
from t2tlite.bin import console

flags.DEFINE_string("problem", None, "Registered problem name (a NAME_rev "
                    "variant swaps inputs and targets).")
flags.DEFINE_string("data_dir", None, "Folder of the vocabulary and TFRecord "
                    "files written by t2t-datagen.")
flags.DEFINE_string("tmp_dir", None, "Scratch and download folder "
                    "(default: DATA_DIR/tmp).")
flags.DEFINE_string("raw_data_dir", None, "Local raw corpus, for problems that "
                    "read one (translation: <split>.<lang>[.gz] files; "
                    "parsing_wsj: .mrg files). Translation without it "
                    "downloads its corpus (WMT through tensorflow-datasets, "
                    "Multi30k from its release).")
flags.DEFINE_string("t2t_usr_dir", None, "Plugin folder: its __init__.py "
                    "imports the modules that register problems, hparams "
                    "sets and models.")
flags.DEFINE_string("output_dir", None, "Training folder: checkpoints, "
                    "TensorBoard summaries, hparams.json, run.json and the "
                    "vocabulary copies (t2t-trainer writes it, and resumes a "
                    "run found there).")

FLAGS = flags.FLAGS


def load_plugins():
  """Imports entry-point plugins (group t2tlite.plugins) and --t2t_usr_dir."""
  registry.load_entry_point_plugins()
  if FLAGS.t2t_usr_dir:
    try:
      registry.import_usr_dir(FLAGS.t2t_usr_dir)
    except FileNotFoundError as error:
      raise FileNotFoundError(f"--t2t_usr_dir={error}") from None


def load_run_plugins(output_dir):
  """Imports the plugin folder run.json records when the run's model is not
  registered yet, so that a plugin model is rebuilt without repeating
  --t2t_usr_dir.

  Raises:
    FileNotFoundError: not a training folder, or the plugin folder is gone.
  """
  from t2tlite import run_dir  # loads TensorFlow, which only runs need
  info = run_dir.read_run_info(output_dir)
  usr_dir = info.flags.get("t2t_usr_dir")
  if usr_dir and info.model not in registry.models:
    registry.import_usr_dir(usr_dir)


def check_data_dir(data_dir):
  """Fails clearly when --data_dir names something other than a folder.

  Raises:
    console.CommandError: naming the flag and the path.
  """
  if os.path.exists(data_dir) and not os.path.isdir(data_dir):
    raise console.CommandError(
        f"--data_dir={data_dir} is a file; expected a folder (where "
        "t2t-datagen writes the vocabulary and TFRecord files).")
