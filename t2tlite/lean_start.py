"""A lighter start for the commands: TensorFlow imports Keras, and Keras
imports IPython (to tell whether it runs in a notebook, for
`keras.saving.KerasFileEditor`) and matplotlib.pyplot (for
`keras.visualization.plot_image_gallery`) whenever they are installed. No
command uses either, and the two cost about 0.5 of the 3.3 CPU-seconds a
command takes to load TensorFlow (docs/performance_log.md, 2026-11-27, "A
lighter start for the commands"). So they are hidden while TensorFlow (or
Keras) is first imported (an ImportError, which Keras takes for a missing
optional package), and import as usual afterwards (t2t-attention draws with
pyplot). Modules imported before are left alone. Library code never calls
`install`: a user's notebook keeps Keras's notebook display.
"""
import contextlib
import sys

from t2tlite import import_hooks

UNUSED_BY_THE_COMMANDS = ("IPython", "matplotlib.pyplot")


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


def install():
  """Hides UNUSED_BY_THE_COMMANDS during the first import of tensorflow or
  keras. Call before either is imported."""
  import_hooks.around_first_import(
      ("tensorflow", "keras"), lambda: hidden(UNUSED_BY_THE_COMMANDS))
