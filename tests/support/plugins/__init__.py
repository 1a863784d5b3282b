"""A plugin folder for tests: `--t2t_usr_dir=tests/support/plugins` registers
the problems `plugin_sort_digits`, `plugin_copy_digits` and
`plugin_reverse_digits` (to mix), the hparams set `plugin_tiny` and the model
`plugin_postnorm_transformer`."""
from . import postnorm_model  # noqa: F401
from . import digit_languages  # noqa: F401
from . import sort_digits  # noqa: F401
from . import tiny_hparams  # noqa: F401
