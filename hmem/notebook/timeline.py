"""Belief timelines: everything stored about a subject, drawn on both time axes.

``plot_timeline(memory, "maya")`` returns a matplotlib ``Figure`` with one row per fact, rows
grouped by revision chain (and by subject when several are given):

* left, **valid time** (when it was true in the world): each fact's period as a bar. Solid:
  believed now. Hatched: superseded by a change in the world but still believed for its earlier
  period. Grey, dashed: corrected (no longer believed at all). Red, crossed: forgotten. A dotted
  outline shows a period the fact was believed to have before a revision cut it short; open
  periods run to the right edge.
* right, **transaction time** (when the agent believed it): the same rows as bars from the
  moment the fact was recorded to the moment it stopped being believed, with a marker for each
  event (remembered, revised, superseded, corrected, forgotten) and who or why.

matplotlib is an optional extra (``pip install 'hmem[plot]'``), imported only when drawing.
:func:`timeline_rows` computes the same rows without it.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from hmem.errors import HmemError, InvalidInput
from projections.printable import visible

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from hmem.memory import Memory
    from hmem.views import FactView

__all__ = ["plot_timeline", "timeline_rows", "TimelineRow", "TimelineMark", "PlotUnavailable"]

INSTALL = "pip install 'hmem[plot]'"


class PlotUnavailable(HmemError, ImportError):
    """matplotlib (the ``plot`` extra) is not installed."""


class TimelineMark(msgspec.Struct, frozen=True):
    """One event on a fact's row, at its transaction time."""

    at: datetime
    kind: str  # remembered, revised, superseded, corrected, forgotten
    label: str


class TimelineRow(msgspec.Struct, frozen=True):
    """One fact as the timeline draws it."""

    subject: str
    chain: int  # id of the first fact of its revision chain
    id: int
    text: str
    status: str  # current, superseded (world change, still valid before it), corrected, forgotten
    valid_from: datetime
    valid_to: datetime | None  # None: open-ended
    earlier_periods: tuple[tuple[datetime, datetime | None], ...]  # believed before a revision
    believed_from: datetime
    believed_to: datetime | None  # None: still believed
    marks: tuple[TimelineMark, ...]
    source_agent: str | None
    source_ref: str | None


def timeline_rows(memory: Memory, subject: str | Sequence[str]) -> list[TimelineRow]:
    """The rows of a timeline: every fact ever stored about the subject(s), grouped by chain
    (oldest chain first, each chain oldest version first)."""
    subjects = _subjects(subject)
    rows: list[TimelineRow] = []
    seen: set[int] = set()
    for name in subjects:
        facts = {f.id: f for f in memory.history(name)}
        if not facts:
            raise InvalidInput(
                f"no facts about {name!r} in namespace {memory.namespace!r} (subjects match "
                f"case-insensitively; `hmem recall {name}` finds facts that mention it)"
            )
        chains: dict[int, list[FactView]] = {}
        for fact in facts.values():
            root = fact
            while root.supersedes is not None and root.supersedes in facts:
                root = facts[root.supersedes]
            chains.setdefault(root.id, []).append(fact)
        for root_id, chain in sorted(chains.items()):
            for fact in sorted(chain, key=lambda f: f.id):
                if fact.id not in seen:
                    seen.add(fact.id)
                    rows.append(_row(fact, root_id, facts))
    return rows


def plot_timeline(
    memory: Memory,
    subject: str | Sequence[str],
    out: str | os.PathLike[str] | None = None,
    *,
    title: str | None = None,
    wrap: int = 34,
    dpi: int = 150,
) -> Figure:
    """Draw the belief timeline of ``subject`` (or several subjects) and return the Figure; with
    ``out``, also save it there (PNG, SVG or PDF by extension). Needs ``hmem[plot]``."""
    mpl = _matplotlib()
    rows = timeline_rows(memory, subject)
    stats = memory.stats()
    seq = stats.head_seq
    now = memory.clock()  # the memory's now (not its last change): "now" is drawn there
    subjects = _subjects(subject)
    if title is None:
        title = "What the agent believed about " + ", ".join(subjects)
    subtitle = f"namespace {memory.namespace} · log seq {seq} · {now:%Y-%m-%d %H:%M} UTC"
    fig = _draw(mpl, rows, subjects, now, title, subtitle, wrap)
    if out is not None:
        try:
            fig.savefig(os.fspath(out), dpi=dpi, bbox_inches="tight", facecolor="white")
        except ValueError as e:  # e.g. an unknown extension
            raise InvalidInput(
                f"cannot write {os.fspath(out)!r}: {e}; use .png, .svg or .pdf"
            ) from e
    return fig


# ---------------------------------------------------------------------------- rows


def _subjects(subject: str | Sequence[str]) -> list[str]:
    subjects = [subject] if isinstance(subject, str) else list(subject)
    if not subjects or not all(isinstance(s, str) and s.strip() for s in subjects):
        raise InvalidInput("name at least one subject, e.g. plot_timeline(m, 'maya')")
    return subjects


def _row(fact: FactView, chain: int, facts: dict[int, FactView]) -> TimelineRow:
    last = fact.versions[-1]
    if fact.forgotten_at is not None:
        status = "forgotten"
    elif last.tx_to is None:
        status = "current" if fact.superseded_by is None else "superseded"
    else:
        status = "corrected"
    shown = (last.valid_from, last.valid_to)
    earlier = tuple(
        (v.valid_from, v.valid_to) for v in fact.versions[:-1]
        if (v.valid_from, v.valid_to) != shown
    )
    marks = []
    who = " ".join(p for p in (fact.source_agent, fact.source_ref) if p)
    if fact.supersedes is None:
        label = "remembered"
    elif fact.revision == "world":
        label = _join(f"revised #{fact.supersedes} (world change)", fact.reason)
    else:
        label = _join(f"corrects #{fact.supersedes}", fact.reason)
    label = f"{label} · {who}" if who else label
    marks.append(TimelineMark(
        fact.recorded_at, "remembered" if fact.supersedes is None else "revised", label))
    if fact.superseded_by is not None and fact.superseded_at is not None:
        new = facts.get(fact.superseded_by)
        corrected = new is not None and new.revision == "correction"
        marks.append(TimelineMark(
            fact.superseded_at, "corrected" if corrected else "superseded",
            f"{'corrected' if corrected else 'superseded'} by #{fact.superseded_by}",
        ))
    if fact.forgotten_at is not None:
        marks.append(TimelineMark(fact.forgotten_at, "forgotten",
                                  _join("forgotten", fact.forget_reason)))
    return TimelineRow(
        subject=fact.subject, chain=chain, id=fact.id, text=fact.text, status=status,
        valid_from=last.valid_from, valid_to=last.valid_to, earlier_periods=earlier,
        believed_from=fact.recorded_at, believed_to=last.tx_to, marks=tuple(marks),
        source_agent=fact.source_agent, source_ref=fact.source_ref,
    )


def _join(head: str, tail: str | None) -> str:
    return f"{head}: {tail}" if tail else head


# ---------------------------------------------------------------------------- drawing


def _matplotlib() -> Any:
    try:
        import matplotlib
        import matplotlib.dates
        import matplotlib.figure
        import matplotlib.lines
        import matplotlib.patches
        import matplotlib.text
    except ImportError as e:
        raise PlotUnavailable(
            f"belief timelines need matplotlib: {INSTALL} (or pip install matplotlib)"
        ) from e
    return matplotlib


_BLUE = "#2b6cb0"
_STYLE: dict[str, dict[str, Any]] = {
    "current": {"facecolor": _BLUE, "edgecolor": _BLUE, "hatch": None, "linestyle": "-"},
    "superseded": {"facecolor": "#bee3f8", "edgecolor": _BLUE, "hatch": "///", "linestyle": "-"},
    "corrected": {"facecolor": "#e2e8f0", "edgecolor": "#718096", "hatch": None,
                  "linestyle": "--"},
    "forgotten": {"facecolor": "#fff5f5", "edgecolor": "#c53030", "hatch": "xx",
                  "linestyle": "--"},
}
_LEGEND = {
    "current": "believed now",
    "superseded": "superseded by a change in the world, still true for its period",
    "corrected": "corrected: no longer believed",
    "forgotten": "forgotten (tombstone; kept in history)",
}
_MARKS: dict[str, tuple[str, str]] = {  # kind -> (marker, colour)
    "remembered": ("o", "#2d3748"),
    "revised": ("D", _BLUE),
    "superseded": ("|", _BLUE),
    "corrected": ("X", "#4a5568"),
    "forgotten": ("X", "#c53030"),
}
_TEXT = "#1a202c"
_MUTED = "#4a5568"


def _draw(
    mpl: Any, rows: list[TimelineRow], subjects: list[str], now: datetime, title: str,
    subtitle: str, wrap: int,
) -> Figure:
    mdates = mpl.dates
    labels = [textwrap.fill(f"#{r.id}  {r.text}", wrap) for r in rows]
    # Layout in data units, top to bottom: an optional subject header, then one slot per row
    # whose height follows its wrapped label.
    ys: list[float] = []
    headers: list[tuple[float, str]] = []
    y = 0.0
    prev_subject: str | None = None
    for row, label in zip(rows, labels, strict=True):
        key = row.subject.casefold()
        if len(subjects) > 1 and key != prev_subject:
            y += 0.35 if prev_subject is None else 0.9
            headers.append((y - 0.1, row.subject))
            y += 0.35
        prev_subject = key
        height = max(1.0, 0.42 * (label.count("\n") + 1) + 0.35)
        ys.append(y + height / 2)
        y += height
    total = y

    fig: Figure = mpl.figure.Figure(figsize=(13.5, 1.9 + 0.5 * total), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [1.45, 1]})
    heading = fig.suptitle(title, fontsize=13, fontweight="bold", color=_TEXT, x=0.01,
                           ha="left")
    # on the title's line, right-aligned (anchored to the title, which the layout places)
    fig.add_artist(mpl.text.Annotation(
        subtitle, xy=(0.99, 0.5), xycoords=("figure fraction", heading), ha="right",
        va="center", fontsize=8.5, color=_MUTED,
    ))
    left.set_title("valid time: when it was true in the world", fontsize=10, color=_MUTED,
                   loc="left")
    right.set_title("transaction time: when the agent believed it", fontsize=10, color=_MUTED,
                    loc="left")

    # valid-time axis: from the earliest start to the latest finite time (or now)
    starts = [r.valid_from for r in rows]
    ends = [t for r in rows for t in [r.valid_to, *(p[1] for p in r.earlier_periods)] if t]
    lo, hi = min(starts), max([*starts, *ends, now])
    v_lo, v_hi = _limits(mdates, lo, hi, right_pad=0.12)
    # transaction-time axis: from the first belief to now (or the last change, if a clock put
    # it later)
    changes = [t for r in rows for t in (r.believed_from, r.believed_to) if t is not None]
    t_lo, t_hi = _limits(mdates, min(changes), max([*changes, now]), right_pad=0.4)

    bands = _chain_bands(rows, ys)
    for ax in (left, right):
        for i, (top, bottom) in enumerate(bands):
            if i % 2 == 0:
                ax.axhspan(top, bottom, color="#f7fafc", zorder=0, lw=0)
        for hy, _ in headers[1:]:
            ax.axhline(hy - 0.45, color="#a0aec0", lw=0.8, zorder=1)
        ax.grid(axis="x", color="#e2e8f0", lw=0.7, zorder=0)
        ax.set_axisbelow(True)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="y", length=0)
        locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    left.set_xlim(v_lo, v_hi)
    right.set_xlim(t_lo, t_hi)
    left.axvline(mdates.date2num(now), color="#718096", lw=1, ls=":", zorder=1)
    left.annotate("now", (mdates.date2num(now), 0), xytext=(2, 2), textcoords="offset points",
                  fontsize=8, color=_MUTED, va="bottom", annotation_clip=False)

    for row, y0 in zip(rows, ys, strict=True):
        _valid_bar(mpl, left, row, y0, v_hi)
        _belief_bar(mpl, right, row, y0, t_hi)

    for hy, name in headers:
        left.annotate(_drawn(name), (0, hy), xycoords=("axes fraction", "data"), xytext=(-8, 0),
                      textcoords="offset points", ha="right", va="center", fontsize=11,
                      fontweight="bold", color=_TEXT, annotation_clip=False)
    left.set_ylim(total + 0.2, -0.2)
    left.set_yticks(ys, [_drawn(label) for label in labels], fontsize=9, color=_TEXT)
    _legend(mpl, fig)
    return fig


def _drawn(text: str) -> str:
    """Stored text as matplotlib draws it literally: a ``$`` escaped (else two start math
    mode and a lone one fails the draw), control characters shown as escapes."""
    return visible(text).replace("$", r"\$")


def _limits(mdates: Any, lo: datetime, hi: datetime, *, right_pad: float) -> tuple[float, float]:
    least = timedelta(minutes=20)
    if hi - lo < least:  # e.g. everything recorded within a few minutes
        lo, hi = lo - (least - (hi - lo)) / 2, hi + (least - (hi - lo)) / 2
    a, b = mdates.date2num(lo), mdates.date2num(hi)
    span = b - a
    return a - 0.04 * span, b + right_pad * span


def _chain_bands(rows: list[TimelineRow], ys: list[float]) -> list[tuple[float, float]]:
    bands: list[tuple[float, float]] = []
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i].chain != rows[start].chain:
            bands.append((ys[start] - 0.45, ys[i - 1] + 0.45))
            start = i
    return bands


def _bar(mpl: Any, ax: Any, x0: float, x1: float, y: float, height: float, status: str) -> None:
    style = _STYLE[status]
    ax.add_patch(mpl.patches.Rectangle(
        (x0, y - height / 2), max(x1 - x0, 1e-6), height, facecolor=style["facecolor"],
        edgecolor=style["edgecolor"], hatch=style["hatch"], linestyle=style["linestyle"],
        linewidth=1.2, zorder=3,
    ))


def _valid_bar(mpl: Any, ax: Any, row: TimelineRow, y: float, x_end: float) -> None:
    num = mpl.dates.date2num
    for start, stop in row.earlier_periods:  # what it was believed to cover before a revision
        x1 = x_end if stop is None else num(stop)
        ax.add_patch(mpl.patches.Rectangle(
            (num(start), y - 0.22), x1 - num(start), 0.44, fill=False, edgecolor="#718096",
            linestyle=":", linewidth=1.1, zorder=2,
        ))
    x0 = num(row.valid_from)
    x1 = x_end if row.valid_to is None else num(row.valid_to)
    _bar(mpl, ax, x0, x1, y, 0.44, row.status)
    if row.valid_to is None:
        ax.plot([x_end], [y], marker=">", color=_STYLE[row.status]["edgecolor"], markersize=7,
                zorder=4, clip_on=False)
    span = f"{row.valid_from:%Y-%m-%d} → " + (
        "open" if row.valid_to is None else f"{row.valid_to:%Y-%m-%d}")
    ax.annotate(span, (x0, y - 0.22), xytext=(1, 2), textcoords="offset points", fontsize=7.5,
                color=_MUTED, va="bottom", ha="left", zorder=5)


def _belief_bar(mpl: Any, ax: Any, row: TimelineRow, y: float, x_end: float) -> None:
    num = mpl.dates.date2num
    x0 = num(row.believed_from)
    x1 = x_end if row.believed_to is None else num(row.believed_to)
    _bar(mpl, ax, x0, x1, y, 0.2, row.status)
    if row.believed_to is None:
        ax.plot([x_end], [y], marker=">", color=_STYLE[row.status]["edgecolor"], markersize=6,
                zorder=4, clip_on=False)
    below = 0
    for mark in row.marks:
        marker, colour = _MARKS[mark.kind]
        x = num(mark.at)
        ax.plot([x], [y], marker=marker, color=colour, markersize=7 if marker != "|" else 15,
                markeredgewidth=2.2 if marker == "|" else 0.8,
                markeredgecolor=colour if marker == "|" else "white", zorder=6, linestyle="none")
        # how it started goes above the bar; how it ended (superseded, corrected, forgotten)
        # below, stacked when there are two
        text = _drawn(textwrap.shorten(mark.label, 52, placeholder="…"))
        if mark.kind in ("remembered", "revised"):
            offset, va = 6.0, "bottom"
        else:
            offset, va = -6.0 - 10.0 * below, "top"
            below += 1
        ax.annotate(text, (x, y), xytext=(-3 if va == "bottom" else 3, offset),
                    textcoords="offset points", fontsize=7.5, color=colour, va=va, ha="left",
                    zorder=7)


def _legend(mpl: Any, fig: Any) -> None:
    handles = [
        mpl.patches.Patch(facecolor=s["facecolor"], edgecolor=s["edgecolor"], hatch=s["hatch"],
                          linestyle=s["linestyle"], label=_LEGEND[name])
        for name, s in _STYLE.items()
    ]
    handles.append(mpl.patches.Patch(fill=False, edgecolor="#718096", linestyle=":",
                                     label="period believed before a revision"))
    for kind in ("remembered", "revised", "superseded", "forgotten"):
        marker, colour = _MARKS[kind]
        handles.append(mpl.lines.Line2D([], [], marker=marker, color=colour, linestyle="none",
                                        markersize=7, markeredgewidth=2 if marker == "|" else 1,
                                        label=kind))
    fig.legend(handles=handles, loc="outside lower center", ncol=5, fontsize=8, frameon=False)
