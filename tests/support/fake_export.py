"""An export version folder made of t2t-exporter's metadata and an empty
saved_model.pb: what t2t-serve and ModelSource read before they load the
SavedModel (which fails to load, as a damaged export would).

    version = fake_export(tmp_path / "export" / "1", "/run/ckpt-7")
"""
import dataclasses
import json
import os

from t2tlite.decode.settings import DecodeHParams
from t2tlite.export.layout import METADATA_FILE

EXPORT_DECODE = "beam_size=2,alpha=0.6,extra_length=5"


def fake_export(version, checkpoint, decode=EXPORT_DECODE,
                target_languages=None):
  """An export version folder of a SavedModel never loaded, with the
  metadata t2t-exporter writes (translate_ende_wmt, float32, decode hparams
  `decode`); returns its path as a str."""
  os.makedirs(os.path.join(version, os.path.dirname(METADATA_FILE)))
  open(os.path.join(version, "saved_model.pb"), "wb").close()
  metadata = {"checkpoint": checkpoint, "problem": "translate_ende_wmt",
              "decode_hparams": dataclasses.asdict(
                  DecodeHParams.parse(decode)),
              "precision": "float32",
              "target_languages": target_languages or {}}
  with open(os.path.join(version, METADATA_FILE), "w") as f:
    json.dump(metadata, f)
  return str(version)
