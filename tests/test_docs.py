"""The docs hold: every relative link and anchor resolves, every `hmem ...` command and option
they show exists, every `python -m ...` module they name is there, and the README's library
example runs."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from hmem.adapters.cli import build_parser, iter_parsers

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
INLINE = re.compile(r"`([^`\n]+)`")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _doc_id(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    text = FENCE.sub("", doc.read_text())
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address or mailto: not checked offline
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{_doc_id(doc)}: {broken}"


def _commands(text: str) -> list[str]:
    """Every `hmem ...` or `python -m ...` command line the text shows."""
    lines = []
    for lang, body in FENCE.findall(text):
        if lang in ("", "sh", "bash", "console"):
            lines += [line.lstrip("$ ").strip() for line in body.splitlines()]
    lines += INLINE.findall(FENCE.sub("", text))
    out = []
    for line in lines:
        for part in re.split(r"&&|\|", line.split(" #")[0]):
            part = part.strip()
            if re.match(r"(hmem|python3? -m) ", part):
                out.append(part)
    return out


PARSERS = {path: parser for path, parser in iter_parsers(build_parser())}


def _options(parser) -> dict[str, bool]:
    """Each option string of ``parser`` and whether it takes a value."""
    return {s: a.nargs != 0 for a in parser._actions for s in a.option_strings}


GLOBAL_OPTIONS = _options(build_parser())


def _check_hmem(words: list[str]) -> str | None:
    path: tuple[str, ...] = ()
    known = GLOBAL_OPTIONS
    rest = iter(words[1:])
    for word in rest:
        if word.startswith("-") and word != "-":
            name = word.split("=")[0]
            takes = known.get(name, GLOBAL_OPTIONS.get(name))
            if takes is None:
                return f"{' '.join(path) or 'hmem'} has no option {name}"
            if takes and "=" not in word:
                next(rest, None)  # its value
            continue
        if (*path, word) in PARSERS:
            path = (*path, word)
            known = _options(PARSERS[path])
        elif not path:
            return f"no command {word!r}"
    return None


def _check(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # an inline fragment with an open quote: not a whole command
    if words[0] == "hmem":
        return _check_hmem(words)
    module = words[2] if len(words) > 2 else ""
    if module and not module.startswith("-") and importlib.util.find_spec(module) is None:
        return f"no module {module}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=_doc_id)
def test_every_command_and_option_the_docs_show_exists(doc: Path) -> None:
    problems = [f"`{c}`: {p}" for c in _commands(doc.read_text()) if (p := _check(c))]
    assert not problems, f"{_doc_id(doc)}: {problems}"


def test_the_checks_catch_what_they_look_for() -> None:
    assert _check("hmem recal 'x'") == "no command 'recal'"
    assert _check("hmem recall 'x' --as-off 2") == "recall has no option --as-off"
    assert _check("hmem log verify --expect 3:ab") is None
    assert _check("python -m bench.no_such_bench") == "no module bench.no_such_bench"
    assert "#guarantees" not in _anchors(REPO / "README.md")


def test_the_readme_library_example_runs(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    readme = (REPO / "README.md").read_text()
    code = next(body for lang, body in FENCE.findall(readme) if lang == "python")
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "agent-memory").is_dir()


# ---------------------------------------------------------------------- writers and erasure
# What the docs say about who writes a store and about erasure, held to the code: the words a
# stale doc used are refused, and the behaviour the docs promise is run.

DOCS_AND_NOTEBOOKS = [*DOCS, *sorted((REPO / "examples").glob("*.ipynb"))]


def _sentences(path: Path) -> list[str]:
    text = " ".join(path.read_text().split())  # lines joined: a claim may span a line break
    return [s for s in re.split(r"(?<=[.;|])\s+", text) if s]


_STALE = {
    "an MCP server as the store's only writer": re.compile(
        r"(mcp|server)[^.;|]{0,80}\b(only|sole|single|one) writer|"
        r"\b(only|sole|single) writer[^.;|]{0,80}\b(mcp|server)\b|"
        r"\bserver is the store's writer|\bone writer per store", re.I),
    "erasure as not there yet": re.compile(
        r"not there yet|eras(e|ure)[^.;|]{0,80}\b(not|n't) (yet|there|available|supported|"
        r"implemented)|\bno eras(e|ure) yet|eras(e|ure)[^.;|]{0,40}\b(coming|planned|later)\b",
        re.I),
}


@pytest.mark.parametrize("doc", DOCS_AND_NOTEBOOKS, ids=_doc_id)
def test_no_doc_says_a_writer_or_erasure_claim_the_code_no_longer_holds(doc: Path) -> None:
    found = [f"{what}: {s[:160]!r}" for s in _sentences(doc) for what, stale in _STALE.items()
             if stale.search(s)]
    # CLI writes are shared writers: only a lifetime writer (Memory(path)) meets StoreLocked
    found += [f"CLI writes as refused: {s[:160]!r}" for s in _sentences(doc)
              if "StoreLocked" in s and re.search(r"\bCLI\b", s) and "lifetime" not in s]
    # erase is refused only for a store in the clear (a server store, or seal=False)
    found += [f"erasure as unavailable in general: {s[:160]!r}" for s in _sentences(doc)
              if re.search(r"`?erase`? raises `ErasureUnavailable`", s)
              and not re.search(r"clear|server|PostgreSQL|seal", s, re.I)]
    assert not found, f"{_doc_id(doc)}: {found}"


def test_the_checks_for_writer_and_erasure_claims_catch_the_old_wording() -> None:
    old = ("The MCP server is the store's only writer; CLI writes get StoreLocked while it runs. "
           "Erasure is not there yet.")
    sentences = re.split(r"(?<=[.;|])\s+", old)
    assert _STALE["an MCP server as the store's only writer"].search(sentences[0])
    assert _STALE["erasure as not there yet"].search(sentences[2])
    assert not _STALE["an MCP server as the store's only writer"].search(
        "a plain `Memory(path)` is the store's only writer and is refused while shared writers "
        "are open")


def test_what_the_docs_say_about_writers_and_erasure_holds(tmp_path: Path) -> None:
    """Many writers: with a shared writer open (what `hmem mcp` opens), the CLI's writes go
    through, and a lifetime writer is refused (StoreLocked). Erasure: an embedded store (sealed
    by default) erases and returns its receipt."""
    from hmem import Memory
    from hmem.adapters.cli import main
    from hmem.errors import StoreLocked

    path = tmp_path / "s"
    with Memory(path, shared=True, embedder=None) as server:
        fid = server.remember("maya", "Maya lives in London")
        assert main(["--path", str(path), "--embedder", "none", "remember", "maya",
                     "Maya likes tea"]) == 0
        with pytest.raises(StoreLocked):
            Memory(path, embedder=None)
        server.sync()
        assert len(server.history("maya")) == 2
    with Memory(path, embedder=None) as m:
        receipt = m.erase(fact=fid)
        assert receipt.seq and receipt.fact_ids == (fid,)
