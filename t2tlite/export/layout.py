"""Names inside an export, shared by the exporter that writes one and the
readers that open one (t2t-serve, t2t-exporter's report); TensorFlow-free,
so that a reader can find its files before TensorFlow loads."""
import os

# OUTPUT_DIR/export/<version>: where t2t-exporter writes by default.
EXPORT_SUBDIR = "export"
# VERSION/assets.extra/t2tlite_export.json: the export's problem,
# checkpoint, decode hparams and precision (t2t-serve reads it).
METADATA_FILE = os.path.join("assets.extra", "t2tlite_export.json")


def numbered_versions(names):
  """`[(version, name)]`, sorted by version, of the entries `names` of an
  export folder that name versions: ASCII digits only (str.isdigit() also
  holds for "²", which int() refuses), read as TF Serving reads them."""
  return sorted((int(name), name) for name in names
                if name.isascii() and name.isdigit())
