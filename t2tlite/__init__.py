"""t2tlite: the Transformer of "Attention Is All You Need" as a TF2/Keras 3 toolkit.

Importing the package registers every built-in problem and hparams set.
"""
# Keras must run on TensorFlow whatever the user's environment says.
import os as _os

_os.environ.setdefault("KERAS_BACKEND", "tensorflow")
if _os.environ["KERAS_BACKEND"] != "tensorflow":
  raise ImportError("t2tlite needs KERAS_BACKEND=tensorflow, found "
                    f"{_os.environ['KERAS_BACKEND']!r}")

from t2tlite import registry  # noqa: E402
from t2tlite.hparams_lib import HParams, create_hparams, register_hparams  # noqa: E402,F401
from t2tlite.models.transformer import Transformer, build_model  # noqa: E402,F401
from t2tlite import hparams as _builtin_hparams  # noqa: E402,F401  (registers sets)

__version__ = "0.1.0"
from t2tlite import problems as _builtin_problems  # noqa: E402,F401  (registers problems)
