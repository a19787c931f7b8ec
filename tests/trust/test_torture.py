"""Short versions of the torture harnesses (the full runs are documented in the README)."""

from __future__ import annotations

from tests.trust.torture import crash


def test_sigkill_never_loses_an_acknowledged_event(tmp_path):
    report = crash.run(tmp_path / "store", kills=8, seed=11)
    assert report.problems == []
    assert report.kills == 8
    assert report.acked_events > 8  # the writer really wrote between kills


def test_readers_beside_a_writer_see_whole_current_state():
    from tests.trust.torture import concurrency

    report = concurrency.run(seconds=3, readers=2)
    assert report["problems"] == []
    assert report["second_writer_refused"]
    assert report["writes"] > 0 and report["reads"] > 0
