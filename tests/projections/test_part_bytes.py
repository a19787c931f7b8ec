"""A namespace's part is a function of its state: the part a state loaded from a part writes
has the bytes of the part the fold's state wrote (projections/checkpoint_part.py), so writers
that publish the same namespace at the same seq name the same file."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings

from projections import checkpoint_part
from projections.projector import Projector
from tests.conftest import examples
from tests.projections.test_fold import histories, replay, through_checkpoint


@settings(max_examples=examples(dev=100, ci=300))
@given(histories)
def test_a_loaded_state_writes_the_bytes_its_fold_wrote(history):
    _, _, accepted, _ = replay(history)
    projector = Projector()
    projector.apply_all(accepted, bulk=True)
    loaded = through_checkpoint(projector)
    with tempfile.TemporaryDirectory() as d:
        for namespace, space in projector.spaces():
            again = loaded.space(namespace)
            folded = checkpoint_part.write(Path(d) / "folded", space.state, space.events)
            read = checkpoint_part.write(Path(d) / "read", again.state, again.events)
            assert read == folded, namespace
            assert (Path(d) / "read").read_bytes() == (Path(d) / "folded").read_bytes()
