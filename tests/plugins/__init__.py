"""A plugin folder for tests: `--t2t_usr_dir=tests/plugins` registers the
problem `plugin_sort_digits` and the hparams set `plugin_tiny`."""
from . import sort_digits  # noqa: F401
from . import tiny_hparams  # noqa: F401
