"""What an export's module refuses before it traces anything."""
import pytest

from decode_helpers import settled_of
from t2tlite.export.serving_module import ServingModule


def test_an_input_length_without_room_for_a_token_is_refused(tiny_model):
  with pytest.raises(ValueError, match=r"^max_input_length=1: need >= 2 "):
    ServingModule(tiny_model, None, settled_of(), max_input_length=1)
