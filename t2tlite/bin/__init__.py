"""The t2t-* commands. Importing this package makes TensorFlow's start-up
quiet (`t2tlite.quiet`); library code (t2tlite outside bin/) leaves logging
as the user configured it."""
from t2tlite import quiet as _quiet

_quiet.install()
