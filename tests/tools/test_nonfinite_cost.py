"""tools/nonfinite_cost.py: the step with and without the non-finite record, timed alike."""

import numpy as np
import pytest

from electra_tf.config import preset
from electra_tf.finiteness import NonFiniteRecord
from tools import nonfinite_cost


@pytest.mark.slow
def test_both_steps_are_timed_in_alternating_windows_and_only_one_is_checked(monkeypatch):
    traced = []
    original = NonFiniteRecord.update
    monkeypatch.setattr(
        NonFiniteRecord, "update", lambda self, *a: traced.append(self) or original(self, *a)
    )
    config = preset(
        "tiny",
        vocab_size=64,
        hidden_size=32,
        num_layers=1,
        embedding_size=16,
        num_heads=2,
        max_seq_length=16,
        train_batch_size=4,
        num_warmup_steps=0,
    )
    result = nonfinite_cost.measure(config, steps=2, rounds=3, warmup_steps=1)
    # One of the two models traced the record into its step.
    assert len({id(record) for record in traced}) == 1
    checked, unchecked = result["windows"]["checked"], result["windows"]["unchecked"]
    assert len(checked) == len(unchecked) == 3 and min(checked + unchecked) > 0
    assert result["checked_ms"] == pytest.approx(np.median(checked))
    assert result["unchecked_ms"] == pytest.approx(np.median(unchecked))
    assert result["difference_ms"] == pytest.approx(
        np.median(np.array(checked) - np.array(unchecked))
    )
