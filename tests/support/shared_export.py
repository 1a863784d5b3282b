"""SavedModel exports of the session's shared run (tests/support/
shared_run.py), made once per test session and shared by its pytest-xdist
workers, like the run itself: read them, never write into them.

    folder = exported_run_folder(tmp_path_factory)   # FOLDER/export/1
    version = shared_export(tmp_path_factory, DECODE + ",int8=true")

An export's metadata names the checkpoint it came from, so that t2t-serve
finds the run folder behind it (for requests the export cannot answer).
"""
import os
import re
import shutil

from shared_run import built_once, shared_run_folder

# The decode hparams fixed in the shared exports unless others are asked.
DECODE = "beam_size=2,alpha=0.6,extra_length=5"


def exported_run_folder(tmp_path_factory):
  """A copy of the shared run (`shared_run_folder()`) and its first export,
  FOLDER/export/1, of DECODE in float32, written where export_saved_model
  writes by default; copy it before writing into it."""
  from t2tlite.export import exporter

  def build(path):
    shutil.copytree(shared_run_folder(tmp_path_factory), path)
    exporter.export_saved_model(path, decode_hparams=DECODE)

  return built_once(tmp_path_factory, "exported_run", build)


def shared_export(tmp_path_factory, decode_hparams=DECODE,
                  precision="float32"):
  """The version folder of the shared run's export with `decode_hparams`
  and `precision` (that of `exported_run_folder` for the defaults)."""
  from t2tlite.export import exporter
  if (decode_hparams, precision) == (DECODE, "float32"):
    return os.path.join(exported_run_folder(tmp_path_factory), "export", "1")
  name = "export_" + re.sub(r"[^\w.=-]", "_", f"{decode_hparams}_{precision}")
  export_dir = built_once(
      tmp_path_factory, name, lambda path: exporter.export_saved_model(
          shared_run_folder(tmp_path_factory), export_dir=path,
          decode_hparams=decode_hparams, precision=precision))
  return os.path.join(export_dir, "1")
