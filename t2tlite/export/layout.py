"""Names inside an export, shared by the exporter that writes one and the
readers that open one (t2t-serve, t2t-exporter's report); TensorFlow-free,
so that a reader can find its files before TensorFlow loads."""
import os

# OUTPUT_DIR/export/<version>: where t2t-exporter writes by default.
EXPORT_SUBDIR = "export"
# VERSION/assets.extra/t2tlite_export.json: the export's problem,
# checkpoint, decode hparams and precision (t2t-serve reads it).
METADATA_FILE = os.path.join("assets.extra", "t2tlite_export.json")
