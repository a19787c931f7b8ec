"""The analysis surface: Parquet export, belief timelines, progress bars, and their CLI commands."""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import msgspec
import pytest

from hmem import Memory, errors
from hmem.adapters.cli import main
from hmem.adapters.progress import progress_bar, track
from hmem.notebook.export import EXPORT_QUERIES, export_parquet
from hmem.notebook.timeline import PlotUnavailable, plot_timeline, timeline_rows

PNG = b"\x89PNG\r\n\x1a\n"


def _need_matplotlib() -> None:
    """Skip without the plot extra, except in CI (``$CI`` set), which installs it."""
    if os.environ.get("CI"):
        importlib.import_module("matplotlib")
    else:
        pytest.importorskip("matplotlib")


class DayClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(hours=7)
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """maya: London -> Paris (world change), a corrected job, a forgotten diet; tom; and a
    second namespace whose rows must never leak."""
    path = tmp_path / "store"
    with Memory(path, clock=DayClock(), embedder=None) as m:
        london = m.remember("maya", "Maya lives in London", valid_from="2025-01-01",
                            source_agent="chat", source_ref="s1:t3")
        job = m.remember("maya", "Maya works at Acme as a designer", valid_from="2024-06-01",
                         source_agent="chat")
        veg = m.remember("maya", "Maya is vegetarian", source_agent="planner")
        m.remember("tom", "Tom runs the Lisbon office", source_agent="planner")
        m.revise(job, "Maya works at Acme as a product manager", reason="misheard")
        m.revise(london, "Maya lives in Paris", valid_from="2026-03-01", source_ref="s9:t2")
        m.forget(veg, reason="user asked")
        m.in_namespace("secret").remember("maya", "Maya's password is hunter2")
    return path


def _parquet(path: str | Path) -> list[tuple]:
    return duckdb.sql(f"SELECT * FROM '{path}'").fetchall()


def _columns(path: str | Path) -> list[str]:
    return [row[0] for row in duckdb.sql(f"DESCRIBE SELECT * FROM '{path}'").fetchall()]


# ---------------------------------------------------------------------------- export


def test_export_round_trip(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    with Memory(store, read_only=True) as m:
        calls: list[tuple[int, int]] = []
        result = export_parquet(m, out, progress=lambda done, total: calls.append((done, total)))
        expected = {name: m.sql(f"SELECT count(*) FROM ({q})").fetchall()[0][0]
                    for name, q in EXPORT_QUERIES.items()}
        last_seq = m.last_seq
    assert calls == [(i, 6) for i in range(1, 7)]
    assert result.seq == last_seq == 8 and result.namespace == "default"
    assert set(result.tables) == {
        "events", "fact_versions", "facts", "entities", "recalls", "recall_hits",
    }
    assert {n: t.rows for n, t in result.tables.items()} == expected
    assert expected["events"] == 7 and expected["facts"] == 6
    for name, table in result.tables.items():
        assert Path(table.path) == out / f"{name}.parquet"
        rows = _parquet(table.path)
        assert len(rows) == table.rows
    assert sorted(p.name for p in out.iterdir()) == [
        "entities.parquet", "events.parquet", "fact_versions.parquet", "facts.parquet",
        "manifest.json", "recall_hits.parquet", "recalls.parquet",
    ]  # no temporary files left behind

    # one row per version row, joined with its fact's text and provenance
    cols = _columns(out / "fact_versions.parquet")
    for col in ("fact_id", "row_no", "subject", "text", "valid_from", "valid_to", "tx_from",
                "tx_to", "believed_now", "source_agent", "source_ref", "revision",
                "superseded_by", "forgotten_at", "forget_reason"):
        assert col in cols, col
    london = duckdb.sql(
        f"SELECT row_no, valid_to IS NULL, believed_now, superseded_by "
        f"FROM '{out / 'fact_versions.parquet'}' WHERE fact_id = 1 ORDER BY row_no"
    ).fetchall()
    assert london == [(0, True, False, 6), (1, False, True, 6)]
    events = duckdb.sql(
        f"SELECT seq, type, subject, text, reason FROM '{out / 'events.parquet'}' ORDER BY seq"
    ).fetchall()
    assert [e[1] for e in events] == ["remembered"] * 4 + ["revised", "revised", "forgotten"]
    assert events[-1][2:] == ("maya", "Maya is vegetarian", "user asked")
    tx = duckdb.sql(f"SELECT typeof(tx_at) FROM '{out / 'events.parquet'}' LIMIT 1").fetchall()
    assert tx == [("TIMESTAMP WITH TIME ZONE",)]
    facts_columns = _columns(out / "facts.parquet")
    assert facts_columns[:5] == ["id", "namespace", "subject", "subject_key", "text"]
    assert ("default", "london", 1) in _parquet(out / "entities.parquet")

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "hmem-parquet-export" and manifest["namespace"] == "default"
    assert manifest["seq"] == 8
    assert manifest["tables"]["facts"] == {"file": "facts.parquet", "rows": 6}


def test_export_is_namespace_scoped(store: Path, tmp_path: Path) -> None:
    with Memory(store, log_recalls=True, embedder=None) as m:  # a logged recall in each
        m.recall("where does maya live")
        m.in_namespace("secret").recall("what is the password hunter2")
    with Memory(store, read_only=True) as m:
        export_parquet(m, tmp_path / "default")
        export_parquet(m.in_namespace("secret"), tmp_path / "secret")
        export_parquet(m.in_namespace("empty"), tmp_path / "empty")
    for name in EXPORT_QUERIES:
        default = duckdb.sql(f"SELECT DISTINCT namespace FROM '{tmp_path}/default/{name}.parquet'")
        assert default.fetchall() == [("default",)], name
        assert "hunter2" not in str(_parquet(tmp_path / "default" / f"{name}.parquet"))
        assert _parquet(tmp_path / "empty" / f"{name}.parquet") == [], name
    secret = _parquet(tmp_path / "secret" / "facts.parquet")
    assert len(secret) == 1 and "hunter2" in secret[0][4]
    first = duckdb.sql(f"SELECT min(seq) FROM '{tmp_path}/secret/events.parquet'").fetchall()
    assert first == [(8,)]


def test_export_starts_again_when_the_store_changes(tmp_path: Path) -> None:
    with Memory(tmp_path / "s", embedder=None) as m:
        m.remember("maya", "Maya lives in London")
        writes = []

        def progress(done: int, total: int) -> None:  # a write lands mid-export, once
            if not writes:
                writes.append(m.remember("maya", "Maya speaks French"))

        result = export_parquet(m, tmp_path / "out", progress=progress)
        assert result.seq == m.last_seq == 2
    assert result.tables["events"].rows == result.tables["facts"].rows == 2
    assert len(_parquet(tmp_path / "out" / "events.parquet")) == 2


def test_export_replaces_files_and_rejects_a_file_as_directory(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with Memory(store) as m:
        export_parquet(m, out)
        m.remember("tom", "Tom plays chess")
        again = export_parquet(m, out)
        assert again.tables["facts"].rows == 7 == len(_parquet(out / "facts.parquet"))
        (tmp_path / "file").write_text("x")
        with pytest.raises(errors.InvalidInput, match="not a directory"):
            export_parquet(m, tmp_path / "file")


# ---------------------------------------------------------------------------- timeline


def test_timeline_rows(store: Path) -> None:
    with Memory(store, read_only=True) as m:
        rows = timeline_rows(m, "MAYA")
        both = timeline_rows(m, ["maya", "tom"])
        with pytest.raises(errors.InvalidInput, match="no facts about 'nobody'"):
            timeline_rows(m, "nobody")
        with pytest.raises(errors.InvalidInput):
            timeline_rows(m, [])
        assert timeline_rows(m.in_namespace("secret"), "maya")[0].text.endswith("hunter2")
    # grouped by chain (oldest chain first), each chain oldest version first
    assert [(r.id, r.chain, r.status) for r in rows] == [
        (1, 1, "superseded"), (6, 1, "current"), (2, 2, "corrected"), (5, 2, "current"),
        (3, 3, "forgotten"),
    ]
    london, paris, designer, manager, veg = rows
    assert london.valid_to == datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert london.earlier_periods == ((datetime(2025, 1, 1, tzinfo=timezone.utc), None),)
    assert london.believed_to is None and designer.believed_to is not None
    assert [k.kind for k in london.marks] == ["remembered", "superseded"]
    assert [k.kind for k in designer.marks] == ["remembered", "corrected"]
    assert manager.marks[0].label.startswith("corrects #2: misheard")
    assert paris.marks[0].label == "revised #1 (world change) · chat s9:t2"
    assert veg.marks[-1].kind == "forgotten" and veg.marks[-1].label == "forgotten: user asked"
    assert [r.subject for r in both] == ["maya"] * 5 + ["tom"]


def test_plot_timeline_writes_an_image(store: Path, tmp_path: Path) -> None:
    _need_matplotlib()
    with Memory(store, read_only=True) as m:
        fig = plot_timeline(m, "maya", tmp_path / "maya.png")
        plot_timeline(m, ["maya", "tom"], tmp_path / "both.svg")
        bare = plot_timeline(m, "tom")
    assert (tmp_path / "maya.png").read_bytes().startswith(PNG)
    assert (tmp_path / "maya.png").stat().st_size > 20_000
    assert "<svg" in (tmp_path / "both.svg").read_text()[:500]
    left, right = fig.axes[:2]
    labels = [t.get_text() for t in left.get_yticklabels()]
    assert labels[0] == "#1  Maya lives in London" and len(labels) == 5
    assert "valid time" in left.get_title(loc="left")
    assert "transaction time" in right.get_title(loc="left")
    assert len(bare.axes[0].get_yticklabels()) == 1


def test_a_timeline_draws_now_at_the_memorys_clock_not_at_the_last_event(
    store: Path, tmp_path: Path
) -> None:
    _need_matplotlib()
    import matplotlib.dates as mdates

    later = datetime(2026, 9, 1, 12, tzinfo=timezone.utc)  # months after the last event
    with Memory(store, read_only=True, clock=lambda: later) as m:
        last = m.stats().last_tx
        fig = plot_timeline(m, "maya")
    left, right = fig.axes[:2]
    now = [t for t in left.texts if t.get_text() == "now"]
    assert len(now) == 1 and last is not None and last < later
    assert now[0].xy[0] == pytest.approx(mdates.date2num(later))
    for ax in (left, right):  # both axes reach now, and start before the first belief
        lo, hi = ax.get_xlim()
        assert lo < mdates.date2num(last) < mdates.date2num(later) <= hi
    subtitle = " ".join(a.get_text() for a in fig.artists if hasattr(a, "get_text"))
    assert "2026-09-01 12:00 UTC" in subtitle


def test_a_timeline_draws_stored_dollars_and_controls_as_they_are(tmp_path: Path) -> None:
    """Stored text is not matplotlib markup: ``$`` pairs (mathtext) and a lone ``$`` draw as
    dollars; control characters as escapes."""
    _need_matplotlib()
    with Memory(tmp_path / "s", embedder=None) as m:
        first = m.remember("maya", "Maya pays $5 for $x^2$ \x1b[2J tea", source_ref="$\\$")
        m.revise(first, "Maya pays $6 \u202e", reason="price $up")
        m.remember("$x$", "A $\\frac{1}{0}$ subject")
        fig = plot_timeline(m, ["maya", "$x$"], tmp_path / "t.png")
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0].startswith("#1  Maya pays \\$5 for \\$x^2\\$ \\x1b[2J")
    assert (tmp_path / "t.png").read_bytes().startswith(PNG)


def test_notebooks_show_stored_text_with_its_controls_escaped(tmp_path: Path) -> None:
    """IPython's pretty printer (what a notebook shows) gets no escape sequence."""
    from IPython.lib.pretty import pretty

    with Memory(tmp_path / "s", embedder=None) as m:
        fid = m.remember("maya", "Maya \x1b]0;pwned\x07 lives \u202ein\x9b London")
        shown = [pretty(m.why(fid)), pretty(m.recall("maya").hits[0]), pretty(m.recall("maya"))]
    for text in shown:
        assert not [c for c in text if ord(c) < 0x20 and c not in "\n" or 0x7F <= ord(c) <= 0x9F
                    or c == "\u202e"], text
        assert "\\x1b]0;pwned\\x07" in text


def test_missing_matplotlib_names_the_extra(
    store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with Memory(store, read_only=True) as m, pytest.raises(PlotUnavailable) as caught:
        plot_timeline(m, "maya")
    assert isinstance(caught.value, errors.HmemError)
    assert "pip install 'hmem[plot]'" in str(caught.value)
    assert main(["--path", str(store), "timeline", "maya", "--out", "x.png"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: belief timelines need matplotlib: pip install 'hmem[plot]'")


# ---------------------------------------------------------------------------- CLI


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_export(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "audit"
    code, stdout, err = _run(capsys, "--path", str(store), "export", "--parquet", str(out))
    assert code == 0, err
    assert f"exported namespace default (log seq 8) to {out}" in stdout
    assert "fact_versions.parquet" in stdout and "6 rows" in stdout
    assert err == ""  # not a terminal: no progress

    code, stdout, err = _run(capsys, "export", "--parquet", str(tmp_path / "s"), "--path",
                             str(store), "--namespace", "secret", "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["namespace"] == "secret" and doc["tables"]["facts"]["rows"] == 1
    assert len(_parquet(doc["tables"]["facts"]["path"])) == 1

    code, _, err = _run(capsys, "--path", str(store), "export")
    assert code == 2 and "--parquet" in err
    code, _, err = _run(capsys, "--path", str(tmp_path / "none"), "export", "--parquet", "x")
    assert code == 1 and err.startswith("error: ")


def test_cli_timeline(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _need_matplotlib()
    png = tmp_path / "t.png"
    code, stdout, err = _run(capsys, "--path", str(store), "timeline", "maya", "tom",
                             "--out", str(png))
    assert code == 0, err
    assert stdout.strip() == f"wrote {png} (6 facts about maya, tom)"
    assert png.read_bytes().startswith(PNG)

    code, stdout, err = _run(capsys, "--path", str(store), "timeline", "maya", "--out",
                             str(tmp_path / "j.png"), "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["out"] == str(tmp_path / "j.png") and doc["subjects"] == ["maya"]
    assert [r["status"] for r in doc["rows"]] == [
        "superseded", "current", "corrected", "current", "forgotten"]

    code, _, err = _run(capsys, "--path", str(store), "timeline", "nobody", "--out",
                        str(tmp_path / "n.png"))
    assert code == 1 and "no facts about 'nobody'" in err
    assert not (tmp_path / "n.png").exists()
    code, _, err = _run(capsys, "--path", str(store), "timeline", "maya", "--out",
                        str(tmp_path / "t.foo"))
    assert code == 1 and err.startswith("error: cannot write") and "use .png" in err


def test_cli_progress_only_on_a_tty_and_never_with_quiet(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, _, err = _run(capsys, "--path", str(store), "export", "--parquet", str(tmp_path / "a"))
    assert code == 0 and "exported 6/6 files" in err
    code, _, err = _run(capsys, "--path", str(store), "--quiet", "export", "--parquet",
                        str(tmp_path / "b"))
    assert code == 0 and err == ""
    code, out, err = _run(capsys, "--path", str(store), "replay", "rebuild", "-q")
    assert code == 0 and "rebuilt the projection from 8 events" in out and err == ""
    code, _, err = _run(capsys, "--path", str(store), "replay", "rebuild")
    assert code == 0 and "replayed 8/8 events" in err


# ---------------------------------------------------------------------------- progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_only_on_a_terminal() -> None:
    with progress_bar("replayed", "events", stream=io.StringIO()) as progress:
        assert progress is None
    with progress_bar("replayed", "events", stream=Terminal(), quiet=True) as progress:
        assert progress is None
    term = Terminal()
    with progress_bar("replayed", "events", stream=term) as progress:
        assert progress is not None
        progress(5, 10)
        progress(10, 10)
    assert "replayed 10/10 events" in term.getvalue()
    assert list(track(range(3), "asked", "questions", stream=io.StringIO())) == [0, 1, 2]
    term = Terminal()
    assert list(track(iter("ab"), "asked", "questions", total=2, stream=term)) == ["a", "b"]
    assert "asked 2/2 questions" in term.getvalue()


def test_progress_without_tqdm_prints_a_plain_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    term = Terminal()
    with progress_bar("embedded", "facts", stream=term) as progress:
        assert progress is not None
        progress(1, 2)
        progress(2, 2)
    assert term.getvalue() == "\rembedded 1/2 facts\rembedded 2/2 facts\n"
    term = Terminal()
    with progress_bar("built", "facts", stream=term, leave=False) as progress:
        assert progress is not None
        progress(1, 1)
    assert term.getvalue().endswith("\r\033[K")


def test_jsonl_export_is_the_namespace_log_event_by_event(store: Path, tmp_path: Path) -> None:
    from eventlog.events import Event
    from hmem.notebook.export import export_jsonl

    with Memory(store, log_recalls=True, embedder=None) as m:
        m.recall("where does maya live", source_ref="s1:t9")
        m.in_namespace("secret").recall("what is the password hunter2")
    with Memory(store, read_only=True) as m:
        done = export_jsonl(m, tmp_path / "log.jsonl")
        mine = [ev for ev in m.store.log.read() if ev.namespace == "default"]
        last = m.last_seq
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert done.events == len(lines) == len(mine) and done.seq == last
    assert [msgspec.json.decode(line, type=Event) for line in lines] == mine  # lossless
    assert json.loads(lines[-1])["type"] == "recall"
    assert "hunter2" not in (tmp_path / "log.jsonl").read_text()
    assert os.stat(tmp_path / "log.jsonl").st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob(".*.tmp"))


def test_jsonl_export_from_the_cli(store: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--path", str(store), "export", "--jsonl", "-")
    assert code == 0 and len(out.splitlines()) == 7
    assert all(json.loads(line)["namespace"] == "default" for line in out.splitlines())
    code, _, err = _run(capsys, "--path", str(store), "export", "--parquet", "x", "--jsonl", "-")
    assert code == 2 and "not allowed with" in err
    code, _, err = _run(capsys, "--path", str(store), "export", "--jsonl", str(tmp_path))
    assert code != 0 and "is a directory" in err
