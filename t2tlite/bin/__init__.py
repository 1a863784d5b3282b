"""The t2t-* commands. Importing this package makes TensorFlow's start-up
quiet (`t2tlite.quiet`) and lighter (`t2tlite.lean_start`); library code
(t2tlite outside bin/) leaves logging and imports as the user has them."""
from t2tlite import lean_start as _lean_start
from t2tlite import quiet as _quiet

_quiet.install()
_lean_start.install()
