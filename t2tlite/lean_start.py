"""A lighter start for the commands: TensorFlow imports Keras, and Keras
imports IPython (to tell whether it runs in a notebook, for
`keras.saving.KerasFileEditor`), matplotlib (for its image galleries) and
PIL (for its image loading) whenever they are installed; TensorFlow's own
legacy Keras (under `tf.feature_column`) imports h5py and scipy. No command
uses any of them while TensorFlow loads: hiding IPython and pyplot saved
about 0.5 of the 3.3 CPU-seconds a command took to load TensorFlow
(docs/performance_log.md, 2026-11-27, "A lighter start for the commands"),
hiding the rest about 0.25 more (2026-11-29, "Four more optional packages
hidden at a command's start"). So they are hidden while
TensorFlow (or Keras) is first imported (an ImportError, which both take
for a missing optional package), and import as usual afterwards
(t2t-attention and t2t-report draw with matplotlib). Modules imported
before are left alone. Library code never calls `install`: a user's
notebook keeps Keras's notebook display and image helpers.

The same first import also runs without Python's cyclic garbage collector,
and what it made is then frozen (`gc.freeze`): TensorFlow's import makes
about 424,000 objects that live as long as the process, which the
collector would walk at each of its full collections, while they are made
and at the process's exit (a t2t-decoder of one line 5.71 -> 5.03 CPU-s on
the Xeon with AMX; docs/performance_log.md, 2026-11-29, "TensorFlow's
objects frozen out of the garbage collector's reach"). Objects made later
are collected as usual, and a file opened later and left open is still
flushed at the exit.

And each distinct forward reference is compiled once: TensorFlow's
generated op modules declare about 1,300 TypeVars with some 18,000 string
constraints ("_atypes.Float32", ...), and Python's `typing` compiles each
string into a code object of its own, the same few dozen strings over and
over: about 0.07 of the 1.8 CPU-seconds a command's start took
(docs/performance_log.md, 2026-12-02, "Forward references compiled once").
Code objects are immutable, so sharing one changes nothing else.
"""
import contextlib
import functools
import gc
import sys
import typing

from t2tlite import import_hooks

UNUSED_BY_THE_COMMANDS = ("IPython", "matplotlib", "PIL", "h5py", "scipy")


@contextlib.contextmanager
def hidden(names):
  """Runs the block with the modules `names` unimportable, those not imported
  yet; then makes them importable again."""
  hide = [name for name in names if name not in sys.modules]
  for name in hide:
    sys.modules[name] = None  # `import name` raises ImportError
  try:
    yield
  finally:
    for name in hide:
      if name in sys.modules and sys.modules[name] is None:
        del sys.modules[name]


@contextlib.contextmanager
def collector_paused_then_frozen():
  """Runs the block without the cyclic garbage collector, then moves every
  object made so far out of its reach (`gc.freeze`) and turns it back on
  (if it was on)."""
  was_on = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    gc.freeze()
    if was_on:
      gc.enable()


@contextlib.contextmanager
def forward_references_compiled_once():
  """Runs the block with `typing` compiling each distinct forward
  reference's string once (its `compile` a cached one, found before the
  builtin), then as before. Left alone where `typing` already has a
  `compile` of its own."""
  if "compile" in vars(typing):
    yield
    return
  typing.compile = functools.lru_cache(maxsize=None)(compile)
  try:
    yield
  finally:
    del typing.compile


@contextlib.contextmanager
def _lean_first_import():
  with collector_paused_then_frozen(), hidden(UNUSED_BY_THE_COMMANDS), \
      forward_references_compiled_once():
    yield


def install():
  """Hides UNUSED_BY_THE_COMMANDS during the first import of tensorflow or
  keras, which runs without the garbage collector and is frozen after
  (`collector_paused_then_frozen`), compiling each forward reference once
  (`forward_references_compiled_once`). Call before either is imported."""
  import_hooks.around_first_import(("tensorflow", "keras"),
                                   _lean_first_import)
