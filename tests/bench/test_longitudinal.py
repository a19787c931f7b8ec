"""The longitudinal benchmark: its generator, its reference model, and the four systems on a
small dataset (bench/longitudinal*.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bench.longitudinal import SystemResult, correct, main, run
from bench.longitudinal_data import (
    ATTRIBUTES,
    DATASET_VERSION,
    QUESTION_KINDS,
    Dataset,
    Statement,
    believed_value,
    changed,
    digest,
    generate,
    periods,
    world,
)
from bench.longitudinal_systems import SYSTEMS, PlainFiles, SqliteFts, extract

SMALL = generate(seed=1, people=3)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SystemResult]:
    return {r.name: r for r in run(SMALL, root=tmp_path_factory.mktemp("longitudinal"))}


def _last(data: Dataset, subject: str, attribute: str) -> Statement | None:
    mine = [st for st in data.statements if (st.subject, st.attribute) == (subject, attribute)]
    return mine[-1] if mine else None


# ------------------------------------------------------------------------------ generator


def test_the_generator_is_deterministic_and_versioned() -> None:
    a, b = generate(seed=1, people=4), generate(seed=1, people=4)
    assert a == b and digest(a) == digest(b)
    assert digest(generate(seed=2, people=4)) != digest(a)
    assert digest(generate(seed=1, people=5)) != digest(a)
    assert a.version == DATASET_VERSION and (a.seed, a.people) == (1, 4)


def test_the_default_dataset_has_enough_of_every_question_and_statement() -> None:
    data = generate()
    kinds = [q.kind for q in data.questions]
    for kind in QUESTION_KINDS:
        assert 130 <= kinds.count(kind) <= 300, kind
    made = {st.kind for st in data.statements}
    assert made == {"state", "change", "correction", "retraction"}
    assert len(set(data.subjects)) == len(data.subjects) == 40


def test_statements_are_well_formed() -> None:
    data = generate(seed=3, people=12)
    txs = [st.tx for st in data.statements]
    assert all(a < b for a, b in zip(txs, txs[1:], strict=False))  # strictly increasing
    assert len({st.source_ref for st in data.statements}) == len(data.statements)
    for st in data.statements:
        if st.kind in ("state", "change"):
            assert st.valid_from is not None and st.valid_from <= st.tx
        else:
            assert st.valid_from is None
        if st.kind == "retraction":
            assert st.value is None
        else:
            assert st.value is not None and extract(st.text, st.subject, st.attribute) == st.value
    for s in data.subjects:
        for a in ATTRIBUTES:
            starts = [vf for vf, _ in periods(data.statements, s, a)]
            assert starts == sorted(set(starts))  # valid times only move forward
            mine = [st for st in data.statements if (st.subject, st.attribute) == (s, a)]
            assert mine[0].kind == "state"
            assert all(st.kind != "retraction" for st in mine[:-1])  # nothing after forgetting


# ------------------------------------------------------------------------- reference model


def test_believed_at_the_end_is_now() -> None:
    data = generate(seed=2, people=10)
    end = data.statements[-1].tx
    for q in data.questions:
        if q.kind == "now":
            assert q.attribute is not None
            last = _last(data, q.subject, q.attribute)
            expected = None if last is None or last.kind == "retraction" else last.value
            assert q.answer == expected == believed_value(data.statements, q.subject,
                                                          q.attribute, end)


def test_a_corrected_value_was_believed_until_corrected_but_never_true() -> None:
    data = generate(seed=4, people=15)
    history = data.statements
    seen = 0
    for i, st in enumerate(history):
        if st.kind != "correction":
            continue
        wrong = next(w for w in reversed(history[:i])
                     if (w.subject, w.attribute) == (st.subject, st.attribute))
        assert wrong.kind in ("state", "change") and wrong.valid_from is not None
        before = st.tx - timedelta(seconds=1)
        assert believed_value(history, st.subject, st.attribute, before) == wrong.value
        assert believed_value(history, st.subject, st.attribute, st.tx) == st.value
        # the world over the wrong statement's period holds the corrected value
        assert world(history, st.subject, st.attribute, wrong.valid_from) == st.value
        assert world(history, st.subject, st.attribute, wrong.valid_from) != wrong.value
        seen += 1
    assert seen > 5
    for q in data.questions:
        if q.kind == "valid_at":
            assert q.attribute is not None and q.at is not None
            assert q.answer == world(history, q.subject, q.attribute, q.at)
            assert all(st.kind != "retraction" for st in history
                       if (st.subject, st.attribute) == (q.subject, q.attribute))


def test_changed_between_compares_beliefs_at_both_ends() -> None:
    data = generate(seed=5, people=6)
    history = data.statements
    first, end = history[0].tx - timedelta(days=1), history[-1].tx
    for s in data.subjects:
        assert changed(history, s, end, end) == []
        assert changed(history, s, first, end) == sorted(
            a for a in ATTRIBUTES if believed_value(history, s, a, end) is not None)
        retracted = [st for st in history if st.subject == s and st.kind == "retraction"]
        for st in retracted:
            assert st.attribute in changed(history, s, st.tx - timedelta(seconds=1), st.tx)


# ---------------------------------------------------------------------------------- scoring


def test_scoring_is_exact() -> None:
    assert correct(" Lisbon", "lisbon") and not correct("Lisbon ", "Lyon")
    assert correct(None, None) and not correct(None, "Lisbon") and not correct("Lisbon", None)
    assert correct(["pet", "city"], ["city", "pet"]) and correct([], [])
    assert not correct(["city"], ["city", "pet"])


def test_one_extractor_reads_every_systems_text() -> None:
    line = "- 2025-04-02 (s13:t1) Correction: Maya7 lives in Rio de Janeiro"
    assert extract(line, "Maya7", "city") == "Rio de Janeiro"
    assert extract(line, "Maya71", "city") is None
    assert extract(line, "Maya7", "employer") is None
    assert extract("Leo2 has a pet dog named Rex", "leo2", "pet") == "dog named Rex"


def test_plain_files_and_sqlite_forget_as_such_stores_do(tmp_path: Path) -> None:
    t0 = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
    said = Statement(t0, "state", "Ana1", "pet", "cat named Luna", t0 - timedelta(days=90),
                     "s1:t1", "Ana1 has a pet cat named Luna")
    gone = Statement(t0 + timedelta(days=3), "retraction", "Ana1", "pet", None, None, "s2:t4",
                     "forget Ana1's pet")
    (tmp_path / "f").mkdir()
    (tmp_path / "q").mkdir()
    notes, sql = PlainFiles(tmp_path / "f"), SqliteFts(tmp_path / "q")
    for system in (notes, sql):  # a retraction leaves nothing to answer now
        system.ingest(said)
        system.ingest(gone)
        assert system.value("Ana1", "pet") is None
        assert system.source("Ana1", "pet") is None
    assert "Forget: Ana1's pet" in (tmp_path / "f" / "notes.md").read_text()
    # the notes still know what was believed before; the rows were deleted
    assert notes.value("Ana1", "pet", as_of=t0 + timedelta(days=1)) == "cat named Luna"
    assert sql.value("Ana1", "pet", as_of=t0 + timedelta(days=1)) is None
    sql.close()


# ---------------------------------------------------------------------------------- systems


def test_every_system_answers_every_kind(results: dict[str, SystemResult]) -> None:
    assert set(results) == set(SYSTEMS)
    for r in results.values():
        assert set(r.answers) == {q.id for q in SMALL.questions}
        for kind in QUESTION_KINDS:
            right, n = r.score(SMALL.questions, kind)
            assert n > 0 and 0.0 <= right / n <= 1.0, (r.name, kind)


def test_the_overwrite_store_knows_the_present_and_nothing_else(
    results: dict[str, SystemResult],
) -> None:
    r = results["overwrite"]
    for q in SMALL.questions:
        if q.kind in ("now", "source"):
            assert r.right[q.id], q
        if q.kind == "changed_between":
            assert r.answers[q.id] == []
    assert r.score(SMALL.questions, "believed_at")[0] < r.score(SMALL.questions,
                                                                  "believed_at")[1]


@pytest.mark.parametrize("kind", QUESTION_KINDS)
def test_hmem_answers_every_question_of_a_small_dataset(
    results: dict[str, SystemResult], kind: str
) -> None:
    r = results["hmem"]
    wrong = [(q, r.answers[q.id]) for q in SMALL.questions
             if q.kind == kind and not r.right[q.id]]
    assert not wrong


def test_the_command_prints_the_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert main(["--people", "2", "--systems", "overwrite,plain files", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| **overall** |" in printed and "plain files" in printed
    report = json.loads(out.read_text())
    assert report["digest"] == digest(generate(1, 2))
    assert set(report["systems"]) == {"overwrite", "plain files"}
    assert report["systems"]["overwrite"]["accuracy"]["now"]["correct"] == 8
