"""t2tlite: the Transformer of "Attention Is All You Need" as a TF2/Keras 3
toolkit.

The built-in problems, hparams sets and models register themselves the first
time their registry is used (see t2tlite.registry). `Transformer` and
`build_model` import TensorFlow when first used, so that commands which need
no TensorFlow (t2t-bleu) start without it.
"""
# oneDNN's kernels on every x86 CPU (t2tlite.onednn): TensorFlow reads the
# setting once, as it loads, so this comes before anything imports it.
from t2tlite import onednn as _onednn

_onednn.set_default()

# Keras must run on TensorFlow whatever the user's environment says.
import os as _os  # noqa: E402

_os.environ.setdefault("KERAS_BACKEND", "tensorflow")
if _os.environ["KERAS_BACKEND"] != "tensorflow":
  raise ImportError("t2tlite needs KERAS_BACKEND=tensorflow, found "
                    f"{_os.environ['KERAS_BACKEND']!r}")

from t2tlite import registry  # noqa: E402,F401
from t2tlite.hparams_lib import (  # noqa: E402,F401
    HParams, create_hparams, register_hparams)

__version__ = "0.1.0"


def __getattr__(name):
  if name == "build_model":
    from t2tlite.models import build_model
    return build_model
  if name == "Transformer":
    from t2tlite.models.transformer import Transformer
    return Transformer
  raise AttributeError(f"module 't2tlite' has no attribute {name!r}")
