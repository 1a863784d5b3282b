"""The real-data pipeline, short, through the installed commands: Multi30k
EN->DE datagen, a few minutes of training, checkpoint averaging, beam search
on test2016 and BLEU above a floor measured on this recipe
(tests/support/multi30k_short.py; docs/results.md, "The short version in
the test suite", gives the measurements behind the floors); then the same search with int8
matmuls (decode hparam int8), which may lose little BLEU; then the
CTranslate2 export's greedy search against t2t-decoder's (left out, and the
test skipped after its other checks, where ctranslate2 is not installed)."""
import pytest

from multi30k_short import assert_short_run_above_floors


# Slow (`python -m pytest -m slow`): a BLEU floor, int8's loss and
# CTranslate2's agreement mean something only for a model that translates,
# which takes hundreds of real training steps (400 here, measured at 20
# BLEU).
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_multi30k_end_to_end_bleu_above_floor(tmp_path):
  left_out = assert_short_run_above_floors(tmp_path, "de", check_int8=True,
                                           check_ctranslate2=True)
  if left_out:  # everything else passed
    pytest.skip(f"CTranslate2 check left out: {left_out}")
