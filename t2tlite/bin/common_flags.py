"""Flags shared by the t2t-* commands, and plugin loading.

Flags are defined here and in the other t2tlite/bin modules only; library code
receives values as arguments.
"""
from absl import flags

from t2tlite import problems as _builtin_problems  # noqa: F401  (registers)
from t2tlite import registry

flags.DEFINE_string("problem", None, "Registered problem name (a NAME_rev "
                    "variant swaps inputs and targets).")
flags.DEFINE_string("data_dir", None, "Folder of the vocabulary and TFRecord "
                    "files written by t2t-datagen.")
flags.DEFINE_string("tmp_dir", None, "Scratch and download folder "
                    "(default: DATA_DIR/tmp).")
flags.DEFINE_string("raw_data_dir", None, "Local raw corpus, for problems that "
                    "read one (translation: <split>.<lang>[.gz] files; "
                    "parsing_wsj: .mrg files). Translation without it "
                    "downloads through tensorflow-datasets.")
flags.DEFINE_string("t2t_usr_dir", None, "Plugin folder: its __init__.py "
                    "imports the modules that register problems and hparams "
                    "sets.")

FLAGS = flags.FLAGS


def load_plugins():
  """Imports entry-point plugins (group t2tlite.plugins) and --t2t_usr_dir."""
  registry.load_entry_point_plugins()
  if FLAGS.t2t_usr_dir:
    registry.import_usr_dir(FLAGS.t2t_usr_dir)
