"""t2t-report: a training run as one self-contained HTML page."""
import os

from t2tlite import files
from t2tlite.report import collect, render

REPORT_FILE = "report.html"


def write_report(output_dir, path=None):
  """Writes the report of the run in output_dir (default
  OUTPUT_DIR/report.html, under a temporary name then renamed); returns
  its path."""
  run = collect.collect(output_dir)
  path = path or os.path.join(run.folder, REPORT_FILE)
  files.atomic_write_text(path, render.render(run))
  return path
