"""The real-data pipeline, short, for the second translation problem:
translate_enfr_wmt on Multi30k's French files (offline, --raw_data_dir),
the same commands and recipe as the EN->DE test, BLEU above a floor measured
on this recipe (tests/support/multi30k_short.py). A file of its own, so
pytest-xdist (whole files per worker) can run it beside the EN->DE test."""
import pytest

from multi30k_short import assert_short_run_above_floors


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_multi30k_enfr_end_to_end_bleu_above_floor(tmp_path):
  assert_short_run_above_floors(tmp_path, "fr")
