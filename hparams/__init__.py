"""Built-in hparams sets; importing this package registers them all."""
from t2tlite.hparams import transformer  # noqa: F401
