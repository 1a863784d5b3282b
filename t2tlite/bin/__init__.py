"""The t2t-* commands. Importing this package makes TensorFlow's start-up
quiet (`t2tlite.quiet`) and lighter (`t2tlite.lean_start`), and keeps XLA's
compiled searches for later commands (`t2tlite.xla_cache`); library code
(t2tlite outside bin/) leaves logging, imports and TF_XLA_FLAGS as the user
has them."""
from t2tlite import lean_start as _lean_start
from t2tlite import quiet as _quiet
from t2tlite import xla_cache as _xla_cache

_quiet.install()
_lean_start.install()
_xla_cache.install()
