"""Built-in problems; importing this package registers them all."""
from t2tlite.problems import (  # noqa: F401
    algorithmic, multi30k, parsing, translate)
