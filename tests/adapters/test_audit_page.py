"""The auditor's page (`hmem ui`): each page answers the audit's questions on a small store
(what was believed about X at T, what changed since, who told it, what was it shown), stored
text is escaped, library errors are pages with a status, and a real headless browser (Debian's
chromium) renders it with no stored script running."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from hmem import Memory
from hmem.adapters.audit_page import audit_app
from hmem.adapters.cli import main

REPO = Path(__file__).resolve().parents[2]
IMG = REPO / "docs" / "img"
SCRIPT = "<script>alert(1)</script>"
BIDI = "gpj\u202eexe.jpg"
T0 = "2026-03-01T09:00:00Z"


@dataclass
class Store:
    path: Path
    london: int
    paris: int
    tom: int
    erased: int
    evil: int
    recall_seq: int
    first_seq: int


class Clock:
    """A clock the test moves: one minute per write, from T0."""

    def __init__(self) -> None:
        from datetime import datetime, timedelta, timezone

        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
        self.step = timedelta(minutes=1)

    def __call__(self):  # type: ignore[no-untyped-def]
        self.now += self.step
        return self.now


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    path = tmp_path_factory.mktemp("audit") / "store"
    with Memory(path, log_recalls=True, embedder="none", clock=Clock()) as m:
        london = m.remember("maya", "Maya lives in London", valid_from="2025-01-01",
                           source_agent="chat", source_ref="s1:t4")
        paris = m.revise(london, "Maya lives in Paris", valid_from="2026-02-01",
                         reason="she moved", source_agent="planner", source_ref="s2:t1")
        tom = m.remember("tom", "Tom eats meat", source_agent="chat")
        m.forget(tom, reason="stale")
        erased = m.remember("card", "Card number zebracode", source_agent="chat")
        evil = m.remember("evil", f"{SCRIPT} {BIDI}", source_agent="web")
        m.recall("where does maya live", source_agent="chat", source_ref="s3:t9")
        recall_seq = m.recalls()[-1].seq
        m.erase(fact=erased, reason="gdpr request")
    return Store(path, london, paris, tom, erased, evil, recall_seq, first_seq=london)


@pytest.fixture(scope="module")
def client(store: Store) -> Iterator[TestClient]:
    m = Memory(store.path, read_only=True, embedder="none")
    try:
        with TestClient(audit_app(m), base_url="http://127.0.0.1") as c:
            yield c
    finally:
        m.close()


def text_of(page: str) -> str:
    """The page's text, tags dropped (entities kept), for plain assertions."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_search_answers_what_was_believed_about_a_subject_then(
    client: TestClient, store: Store
) -> None:
    now = client.get("/", params={"q": "where does maya live"})
    assert now.status_code == 200
    assert "Maya lives in Paris" in now.text and f'href="/fact/{store.paris}?' in now.text
    # as of the first write, the agent believed London: recall and the subject's beliefs say so
    then = client.get("/", params={"q": "where does maya live", "subject": "maya",
                                   "as_of": str(store.first_seq)})
    believed = then.text.split("Believed about maya then")[1].split("History of maya")[0]
    assert "Maya lives in London" in then.text.split("History of maya")[0]
    assert "Maya lives in London" in believed and "Maya lives in Paris" not in believed
    # valid in mid-2025 (world time), believed now: London, for its period
    world = client.get("/", params={"subject": "maya", "valid_at": "2025-06-01"})
    held = world.text.split("Believed about maya then")[1].split("History of maya")[0]
    assert "Maya lives in London" in held and "Maya lives in Paris" not in held
    history = client.get("/", params={"subject": "tom"}).text
    assert "Tom eats meat" in history and "forgotten" in history and "stale" in history


def test_fact_page_shows_provenance_timeline_and_events(client: TestClient, store: Store) -> None:
    r = client.get(f"/fact/{store.paris}")
    assert r.status_code == 200
    page = text_of(r.text)
    assert "planner" in page and "s2:t1" in page and "chat" in page and "s1:t4" in page
    assert "Maya lives in London" in page and "Maya lives in Paris" in page
    assert "world change after #1" in page and "she moved" in page
    # valid time and transaction time per version: London's row was cut at Paris' valid_from
    assert "2025-01-01 to 2026-02-01" in page and "2026-02-01 to (open)" in page
    assert "2026-03-01T09:01:00Z (seq 1)" in page and "still believed" in page
    assert "remembered" in page and "revised" in page
    # who saw it: the logged recall that returned it, with a link to its replay
    assert f'href="/recall/{store.recall_seq}?' in r.text
    forgotten = text_of(client.get(f"/fact/{store.tom}").text)
    assert "forgotten" in forgotten and "stale" in forgotten and "forgot #" in forgotten


def test_erased_fact_shows_the_receipt_not_the_text(client: TestClient, store: Store) -> None:
    r = client.get(f"/fact/{store.erased}")
    assert r.status_code == 200
    assert "[erased]" in r.text and "receipt" in r.text and "gdpr request" in r.text
    assert "zebracode" not in r.text
    diff = client.get("/diff", params={"since": "0"}).text
    assert "Erased" in diff and f'href="/fact/{store.erased}?' in diff and "zebracode" not in diff


def test_diff_lists_what_changed_between_two_moments(client: TestClient, store: Store) -> None:
    r = client.get("/diff", params={"since": str(store.first_seq), "until": str(store.tom + 1)})
    assert r.status_code == 200
    revised = r.text.split("<h2>Revised</h2>")[1].split("<h2>Forgotten</h2>")[0]
    assert "Maya lives in London" in revised and "Maya lives in Paris" in revised
    assert "world change" in revised and "she moved" in revised
    added = r.text.split("<h2>Added</h2>")[1].split("<h2>Revised</h2>")[0]
    assert "Tom eats meat" in added and "zebracode" not in added
    forgotten = r.text.split("<h2>Forgotten</h2>")[1]
    assert "Tom eats meat" in forgotten and "stale" in forgotten
    # spoken times work as in the library
    assert client.get("/diff", params={"since": "2026-03-01", "until": "now"}).status_code == 200


def test_recalls_and_replay_show_what_the_agent_was_shown(
    client: TestClient, store: Store
) -> None:
    listed = client.get("/recalls")
    assert listed.status_code == 200
    assert "where does maya live" in listed.text and "s3:t9" in listed.text
    assert f'href="/recall/{store.recall_seq}?' in listed.text
    r = client.get(f"/recall/{store.recall_seq}")
    assert r.status_code == 200
    page = text_of(r.text)
    assert "Maya lives in Paris" in page and "where does maya live" in page
    assert "the same hits in the same order" in page
    assert "erased since" in page  # the erasure after it is said, not hidden


def test_stored_script_and_bidi_are_shown_escaped(client: TestClient, store: Store) -> None:
    for url in (f"/fact/{store.evil}", "/?subject=evil", "/diff?since=0"):
        r = client.get(url)
        assert SCRIPT not in r.text and "\u202e" not in r.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text
        assert "gpj\\u202eexe.jpg" in r.text
        assert "script-src" not in r.headers["content-security-policy"]
        assert "default-src 'none'" in r.headers["content-security-policy"]
    # what a user types comes back escaped too
    typed = client.get("/", params={"q": SCRIPT, "subject": '"><b>x'})
    assert SCRIPT not in typed.text and '"><b>x' not in typed.text


def test_library_errors_are_pages_with_a_status(client: TestClient, store: Store) -> None:
    bad = client.get("/", params={"q": "maya", "as_of": "the day after never"})
    assert bad.status_code == 400
    assert "InvalidTime" in bad.text and "Traceback" not in bad.text
    assert "<html" in bad.text
    assert client.get("/diff", params={"since": "whenever"}).status_code == 400
    missing = client.get("/fact/999999")
    assert missing.status_code == 404 and "FactNotFound" in missing.text
    assert client.get("/recall/999999").status_code in (400, 404)
    assert client.get("/fact/abc").status_code == 404
    assert client.get("/nowhere").status_code == 404


def test_namespace_selector_reads_another_namespace(client: TestClient, store: Store) -> None:
    other = client.get("/", params={"subject": "maya", "ns": "elsewhere"})
    assert other.status_code == 200 and "no fact about this subject" in other.text
    assert client.get(f"/fact/{store.paris}", params={"ns": "elsewhere"}).status_code == 404


def test_loopback_page_refuses_a_foreign_host_header(store: Store) -> None:
    m = Memory(store.path, read_only=True, embedder="none")
    try:
        with TestClient(audit_app(m), base_url="http://attacker.example") as c:
            assert c.get("/").status_code == 400
    finally:
        m.close()


def test_ui_refuses_a_remote_host_without_allow_remote(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--path", str(store.path), "ui", "--host", "0.0.0.0"]) == 1
    assert "--allow-remote" in capsys.readouterr().err


def test_ui_without_the_asgi_stack_names_the_extra(
    store: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    assert main(["--path", str(store.path), "ui"]) == 1
    assert "pip install '.[mcp]'" in capsys.readouterr().err


def test_page_reads_beside_a_live_writer(tmp_path: Path) -> None:
    with Memory(tmp_path / "live", embedder="none") as writer:
        writer.remember("maya", "Maya likes tea")
        reader = Memory(tmp_path / "live", read_only=True, embedder="none")
        try:
            with TestClient(audit_app(reader), base_url="http://127.0.0.1") as c:
                assert "Maya likes tea" in c.get("/", params={"subject": "maya"}).text
                writer.remember("maya", "Maya likes coffee")
                assert "Maya likes coffee" in c.get("/", params={"subject": "maya"}).text
        finally:
            reader.close()


# ---------------------------------------------------------------------------- the browser


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(store: Store) -> Iterator[str]:
    """`hmem ui` itself, in a process of its own, on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hmem", "--path", str(store.path), "--embedder", "none", "ui",
         "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/", timeout=5) as r:
                    assert r.status == 200
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    _, err = proc.communicate(timeout=10)
                    pytest.fail(f"hmem ui did not start: {err.decode(errors='replace')}")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def chromium(*args: str) -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (the browser test "
                    "needs Debian's chromium; it is never skipped)")
    done = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--hide-scrollbars", *args],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_browser_renders_the_pages_and_runs_no_stored_script(served: str, store: Store) -> None:
    search = chromium("--dump-dom", f"{served}/?q=where+does+maya+live&subject=maya")
    assert "Maya lives in Paris" in search and "Maya lives in London" in search
    fact = chromium("--dump-dom", f"{served}/fact/{store.paris}")
    assert "planner" in fact and "still believed" in fact and "she moved" in fact
    evil = chromium("--dump-dom", f"{served}/fact/{store.evil}")
    # the serialized DOM holds the script as text (escaped again), never as an element
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in evil
    assert "<script" not in evil.lower()
    assert "gpj\\u202eexe.jpg" in evil
    replay = chromium("--dump-dom", f"{served}/recall/{store.recall_seq}")
    assert "Maya lives in Paris" in replay and "the same hits in the same order" in replay
    erased = chromium("--dump-dom", f"{served}/fact/{store.erased}")
    assert "[erased]" in erased and "zebracode" not in erased


def test_browser_screenshots_for_the_docs(served: str, store: Store, tmp_path: Path) -> None:
    """Screenshots of the search page and a fact page; HMEM_DOCS_IMG=1 writes them to
    docs/img/ (the ones docs/audit.md shows), else to a temporary directory."""
    folder = IMG if os.environ.get("HMEM_DOCS_IMG") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    shots = {
        "audit-search.png": f"{served}/?q=where+does+maya+live&subject=maya&as_of=1",
        "audit-fact.png": f"{served}/fact/{store.paris}",
    }
    for name, url in shots.items():
        out = folder / name
        chromium(f"--screenshot={out}", "--window-size=1200,900", url)
        data = out.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
