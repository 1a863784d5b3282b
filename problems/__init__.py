"""Built-in problems; importing this package registers them all."""
from t2tlite.problems import algorithmic, parsing, translate  # noqa: F401
