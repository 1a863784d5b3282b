"""The t2t-* commands. Importing this package makes TensorFlow's start-up
quiet (`t2tlite.quiet`) and lighter (`t2tlite.lean_start`), keeps what
TensorFlow frees in the C heap for its next step (`t2tlite.heap`), and
keeps XLA's compiled searches and Decoders' traced searches for later
commands (`t2tlite.xla_cache`, `t2tlite.decode.trace_cache`); library code
(t2tlite outside bin/) leaves logging, imports, the allocator,
TF_XLA_FLAGS and T2TLITE_TRACE_CACHE as the user has them."""
from t2tlite import heap as _heap
from t2tlite import lean_start as _lean_start
from t2tlite import quiet as _quiet
from t2tlite import xla_cache as _xla_cache
from t2tlite.decode import trace_cache as _trace_cache

_quiet.install()
_heap.keep_freed_memory()
_lean_start.install()
_xla_cache.install()
_trace_cache.install()
