"""The answer benchmark harness (bench.answer) end to end against the fake OpenAI server on
127.0.0.1, with canned answers and verdicts; the LongMemEval and BEAM loaders on small files in
the official formats (tests/data/)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import pytest

from bench import answer, beam, beam_data, longmemeval_data
from bench.llm_cache import CachedLLM, cache_key
from bench.locomo_data import answer_dataset
from bench.prompts import Verdict
from hmem.errors import LLMResponseInvalid
from hmem.llm import ChatResult, Usage
from hmem.llm.extractor import EXTRACTION_PROMPT
from tests.support.fake_llm import chat_reply
from tests.support.fake_openai import CHAT, FakeOpenAI, Reply, Request

DATA = Path(__file__).resolve().parents[1] / "data"
LOCOMO = DATA / "locomo_tiny.json"
LME = DATA / "longmemeval_tiny.json"
BEAM = DATA / "beam" / "chats"
ROOT = Path(__file__).resolve().parents[2]

# What the fake answer model says to each question (by its text in the prompt).
ANSWERS = {
    "When did Caroline go to the LGBTQ support group?": "Caroline went on 7 May 2023.",
    "What does Caroline want to study?": "She wants to study counseling.",
    "What is the name of Caroline's puppy?": "I don't know.",
    "What did Melanie paint?": "A sunset over a lake.",
    "Where does John work?": "He works at the bank.",
    "What does Maria do on weekends?": "She goes hiking.",
    "How many jobs did John start in January 2023?": "1 job, at the bank.",
    "What degree did I graduate with?": "Business Administration.",
    "How many bikes do I own now?": "Two bikes.",
    "Can you recommend a show to watch tonight?": "Try Happy Valley, a British crime drama.",
    "How many days before my trip to Lisbon did I renew my passport?": "I don't know: you "
    "never mentioned renewing your passport.",
}


def _field(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith(name):
            return line[len(name):].strip()
    raise AssertionError(f"no {name!r} in the prompt:\n{text}")


def _prompt_tokens(messages: list[dict]) -> int:
    return sum(len(m["content"]) for m in messages) // 4


def fake_llm(request: Request):
    """Answer model 'fake-answer': the canned answer. Judge model 'fake-judge': CORRECT when the
    gold answer is in the generated one (abstention: when it says it doesn't know); its first
    verdict on the Maria question is not JSON, to make the harness re-ask."""
    body = request.json
    messages = body["messages"]
    if messages[0]["content"] == EXTRACTION_PROMPT:  # --ingest extract: each turn as a fact
        turns = json.loads(messages[1]["content"])["new_turns"]
        facts = [{"text": t["text"], "subject": t["speaker"] or "the user",
                  "valid_from": t["said_at"][:10]} for t in turns]
        text = "not json" if "charity race" in messages[1]["content"] else json.dumps(
            {"facts": facts})
        return chat_reply(text, model=body["model"], prompt_tokens=_prompt_tokens(messages),
                          completion_tokens=len(text) // 4 + 1)
    prompt = messages[1]["content"]
    question = _field(prompt, "Question:")
    if body["model"] == "fake-answer":
        text = ANSWERS[question]
    else:
        assert body["model"] == "fake-judge" and body["response_format"] == {"type": "json_object"}
        generated = _field(prompt, "Generated answer:").lower()
        if "cannot be answered" in prompt:
            ok = "don't know" in generated
        elif "Rubric, the points a good answer makes:" in prompt:
            ok = "british crime drama" in generated and "Reference answer" not in prompt
        else:
            ok = _field(prompt, "Gold answer:").lower() in generated
        label = "CORRECT" if ok else "WRONG"
        if "Maria" in question and len(messages) == 2:
            text = f"The answer is {label}."
        else:
            text = json.dumps({"reason": "compared with the gold answer", "label": label})
    return chat_reply(text, model=body["model"], prompt_tokens=_prompt_tokens(messages),
                      completion_tokens=len(text) // 4 + 1)


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        srv.route(CHAT, fake_llm)
        yield srv


@pytest.fixture
def env(server, monkeypatch):
    pytest.importorskip("openai")
    monkeypatch.setenv("HMEM_BASE_URL", server.base_url)
    monkeypatch.setenv("HMEM_API_KEY", "sk-test")
    monkeypatch.setenv("HMEM_LLM", "fake-answer")
    monkeypatch.delenv("HMEM_JUDGE_LLM", raising=False)
    return server


def run(dataset: str, data: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / f"{dataset}.json"
    code = answer.main([
        dataset, "--data", str(data), "--cache", str(tmp_path / "cache"), "--embedder", "none",
        "--judge-model", "fake-judge", "--workers", "2", "--out", str(out), "-q", *extra,
    ])
    assert code == 0
    return json.loads(out.read_text())


def test_locomo_end_to_end_j_tokens_and_cache(env, tmp_path, capsys):
    server = env
    result = run("locomo", LOCOMO, tmp_path)
    rows = result["report"]["rows"]
    # temporal 2/2, single-hop 2/3, multi-hop 1/1, open-domain 0/1 (after a re-ask for JSON)
    assert {c: (r["n"], round(r["J"], 1)) for c, r in rows.items()} == {
        "multi-hop": (1, 100.0), "temporal": (2, 100.0), "open-domain": (1, 0.0),
        "single-hop": (3, 66.7), "overall": (7, 71.4), "overall (dev)": (4, 75.0),
        "overall (held-out)": (3, 66.7),
    }
    assert rows["overall"]["invalid_verdicts"] == 0
    requests = server.requests_to(CHAT)
    answers = [r.json for r in requests if r.json["model"] == "fake-answer"]
    verdicts = [r.json for r in requests if r.json["model"] == "fake-judge"]
    assert len(answers) == 7 and len(verdicts) == 8  # one judge re-ask
    # token accounting: the server's counts, summed per model
    totals = result["report"]["totals"]
    assert totals["answer"] == {
        "calls": 7, "prompt_tokens": sum(_prompt_tokens(b["messages"]) for b in answers),
        "completion_tokens": sum(len(ANSWERS[_field(b["messages"][1]["content"], "Question:")])
                                 // 4 + 1 for b in answers),
    }
    assert totals["judge"]["calls"] == 8
    assert totals["judge"]["prompt_tokens"] == sum(_prompt_tokens(b["messages"]) for b in verdicts)
    assert (totals["cache_hits"], totals["cache_misses"]) == (0, 15)
    # each answer prompt holds exactly the context the record counted
    records = {r["question"]: r for r in result["records"]}
    for body in answers:
        rec = records[_field(body["messages"][1]["content"], "Question:")]
        assert rec["context"] in body["messages"][1]["content"]
        assert rec["context_tokens"] == math.ceil(len(rec["context"]) / 4) > 0
    puppy = records["What is the name of Caroline's puppy?"]
    assert (
        "- Caroline: Wow! And I adopted a puppy named Oscar. (since 2023-05-25)"
        in puppy["context"]
    )
    assert (
        "[shares a photo: a painting of a sunset"
        in records["What did Melanie paint?"]["context"]
    )
    asked = [b["messages"][1]["content"] for b in answers]
    assert sum("Now: Thursday, 25 May 2023" in p for p in asked) == 4  # conv-26's last session
    report = capsys.readouterr().out
    assert "| **hmem (this run)** | **71.4** |" in report and "| Mem0 | 66.9 |" in report
    assert "| Zep (corrected) | 75.1 |" in report

    # rerun: every call comes from the cache, the report is the same
    before = len(server.requests)
    again = run("locomo", LOCOMO, tmp_path)
    assert len(server.requests) == before
    def stable(rows: dict) -> dict:  # recall latency is measured afresh; all else is cached
        return {c: {k: v for k, v in r.items() if k != "recall_ms_p50"} for c, r in rows.items()}

    assert stable(again["report"]["rows"]) == stable(rows)
    assert again["report"]["totals"] == {**totals, "cache_hits": 15, "cache_misses": 0}
    assert [r["answer"] for r in again["records"]] == [r["answer"] for r in result["records"]]


def test_longmemeval_end_to_end_abstention(env, tmp_path):
    result = run("longmemeval", LME, tmp_path)
    rows = result["report"]["rows"]
    assert {c: (r["n"], r["J"]) for c, r in rows.items()} == {
        "single-session-user": (1, 100.0), "single-session-preference": (1, 100.0),
        "knowledge-update": (1, 0.0), "temporal-reasoning": (1, 100.0),
        "abstention": (1, 100.0), "overall": (4, 75.0),
    }
    judged = [r.json["messages"][1]["content"] for r in env.requests_to(CHAT)
              if r.json["model"] == "fake-judge"]
    assert sum("cannot be answered" in p for p in judged) == 1
    assert sum("Rubric, the points" in p for p in judged) == 1  # the preference question
    dates = {r["question"]: r["context"] for r in result["records"]}
    assert "(since 2023-07-15)" in dates["How many bikes do I own now?"]


def test_locomo_answer_flag_and_dry_run_call_nothing(tmp_path, capsys, monkeypatch):
    for name in ("HMEM_BASE_URL", "HMEM_API_KEY", "HMEM_LLM"):
        monkeypatch.delenv(name, raising=False)
    from bench import locomo

    code = locomo.main(["--answer", "--dry-run", "--data", str(LOCOMO), "--embedder", "none",
                        "-q", "--cache", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "7 questions, 2 conversations" in out
    assert "LLM calls: 14 (7 answer + 7 judge" in out
    assert "prompt tokens: answer" in out and "cost at $0.15/M" in out
    assert not any(tmp_path.iterdir())  # nothing cached, nothing called


def test_beam_dry_run_counts_questions(tmp_path, capsys):
    assert beam.main(["--data", str(BEAM), "--dry-run", "--embedder", "none", "-q",
                      "--cache", str(tmp_path)]) == 0
    assert "LLM calls: 10 (5 answer + 5 judge" in capsys.readouterr().out


def test_no_endpoint_is_a_clear_message_not_a_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HMEM_")}
    env["HMEM_EMBEDDER"] = "none"
    for args in (["bench.answer", "locomo"], ["bench.locomo", "--answer"]):
        proc = subprocess.run(
            [sys.executable, "-m", *args, "--data", str(LOCOMO), "--cache", str(tmp_path)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert "HMEM_LLM" in proc.stderr and "HMEM_BASE_URL" in proc.stderr
        assert proc.stderr.startswith("error: no LLM is configured")


def test_endpoint_failure_stops_the_run_and_a_rerun_resumes(env, tmp_path, capsys):
    server = env
    seen: list[str] = []

    def refuse_the_puppy(request: Request):
        question = _field(request.json["messages"][1]["content"], "Question:")
        seen.append(question)
        if "puppy" in question and request.json["model"] == "fake-answer":
            return Reply.error(400, "this model cannot talk about puppies",
                               type="invalid_request_error")
        return fake_llm(request)

    server.route(CHAT, refuse_the_puppy)
    code = answer.main(["locomo", "--data", str(LOCOMO), "--cache", str(tmp_path / "cache"),
                        "--embedder", "none", "--judge-model", "fake-judge", "--workers", "1",
                        "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.startswith("error: chat with 'fake-answer'") and "HTTP 400" in err
    asked = len(server.requests)
    assert 0 < asked < 15  # stopped at the puppy, not after every question
    server.route(CHAT, fake_llm)
    result = run("locomo", LOCOMO, tmp_path)
    totals = result["report"]["totals"]
    assert totals["cache_hits"] == asked - 1  # all but the refused request came from the cache
    assert totals["cache_hits"] + totals["cache_misses"] == 15


def test_locomo_extract_mode_stores_extracted_facts_and_caches_extraction(env, tmp_path):
    result = run("locomo", LOCOMO, tmp_path, "--ingest", "extract")
    extracting = [r for r in env.requests_to(CHAT)
                  if r.json["messages"][0]["content"] == EXTRACTION_PROMPT]
    # three sessions; the one about the charity race answers garbage twice and is skipped
    assert len(extracting) == 4
    extraction = result["report"]["settings"]["extraction"]
    assert extraction["failed_sessions"] == 1 and extraction["prompt"] == "extract-v1"
    assert extraction["calls"] == 4
    assert extraction["prompt_tokens"] == sum(_prompt_tokens(r.json["messages"])
                                              for r in extracting)
    assert round(result["report"]["rows"]["overall"]["J"], 1) == 71.4  # canned answers
    records = {r["question"]: r for r in result["records"]}
    assert "- Caroline: Hey Mel! I went to a LGBTQ support group yesterday" in \
        records["When did Caroline go to the LGBTQ support group?"]["context"]
    assert "Oscar" not in records["What is the name of Caroline's puppy?"]["context"]
    # the store's clock is fixed, so a rerun sends the same extraction requests: all cached
    before = len(env.requests)
    run("locomo", LOCOMO, tmp_path, "--ingest", "extract")
    assert len(env.requests) == before


# ------------------------------------------------------------------------------ loaders


def test_locomo_answer_dataset_keeps_categories_1_to_4_with_answers():
    ds = answer_dataset(LOCOMO)
    assert [q.category for q in ds.questions] == [
        "temporal", "single-hop", "single-hop", "multi-hop", "single-hop", "open-domain",
        "temporal",
    ]
    assert ds.questions[-1].answer == "1" and ds.questions[-1].evidence == frozenset()
    assert [len(c.sessions) for c in ds.conversations] == [2, 1]  # session_3 has a date only
    assert ds.questions[0].asked_at == datetime(2023, 5, 25, 13, 14, tzinfo=timezone.utc)
    assert "1 questions of category 5" in ds.notes[0]


def test_longmemeval_loader_reads_the_official_format():
    ds = longmemeval_data.load(LME)
    first, bikes, pref, abst = ds.questions
    assert [q.abstention for q in ds.questions] == [False, False, False, True]
    assert pref.rubric == (pref.answer,) and not first.rubric
    assert abst.qid == "gpt4_2655b836_abs" and abst.category == "temporal-reasoning"
    assert first.evidence == {"answer_280352e9:0"}
    assert first.evidence_sessions == {"answer_280352e9"}
    assert bikes.evidence_sessions == {"answer_5b2c_1", "answer_5b2c_2"}
    assert bikes.answer == "3"
    assert first.asked_at == datetime(2023, 5, 30, 23, 40, tzinfo=timezone.utc)
    conv = ds.conversations[0]
    assert conv.id == "e47becba"
    assert [(s.id, s.when) for s in conv.sessions] == [
        ("sharegpt_yywfFr5_0", datetime(2023, 5, 20, 2, 21, tzinfo=timezone.utc)),
        ("answer_280352e9", datetime(2023, 5, 22, 14, 5, tzinfo=timezone.utc)),
    ]
    assert conv.sessions[1].turns[0].speaker == "user"
    assert conv.sessions[1].turns[0].ref == "answer_280352e9:0"
    assert longmemeval_data.parse_date("2023/05/20") == datetime(2023, 5, 20, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="not a LongMemEval date"):
        longmemeval_data.parse_date("20 May 2023")


def test_longmemeval_loader_rejects_mismatched_haystacks(tmp_path):
    item = json.loads(LME.read_text())[0]
    item["haystack_dates"] = item["haystack_dates"][:1]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([item]))
    with pytest.raises(ValueError, match="e47becba: haystack_session_ids, haystack_dates"):
        longmemeval_data.load(path)


def test_beam_loader_reads_the_official_layout():
    ds = beam_data.load(BEAM)
    assert [c.id for c in ds.conversations] == ["100K/1", "100K/2"]
    one, two = ds.conversations
    # time anchors: on the first user message, on the batch, carried to a batch without one
    day = lambda y, m, d: datetime(y, m, d, tzinfo=timezone.utc)  # noqa: E731
    assert [s.when for s in one.sessions] == [day(2024, 3, 15), day(2024, 4, 2), day(2024, 4, 2)]
    assert [s.id for s in one.sessions] == ["batch-1", "batch-2", "batch-3"]
    first = one.sessions[0].turns[0]
    assert first.ref == "0" and first.speaker == "user"
    assert first.text.endswith("ends on March 29.")  # the '->-> 1,1' marker is gone
    # chat_trunecated.json wins over chat.json, as in BEAM's answer_generation.py
    assert "cello" in two.sessions[0].turns[0].text
    assert [s.when for s in two.sessions] == [day(2024, 5, 1), day(2024, 6, 10)]
    by = {q.category: q for q in ds.questions}
    assert list(by) == ["abstention", "information_extraction", "instruction_following",
                        "knowledge_update", "temporal_reasoning"]
    assert by["abstention"].abstention and not by["knowledge_update"].abstention
    assert by["abstention"].answer.startswith("Based on the provided chat, there is no")
    assert by["information_extraction"].rubric == ("LLM response should state: March 29",)
    assert by["instruction_following"].answer.startswith("Response should include the names")
    assert by["knowledge_update"].evidence == {"2", "4"}
    assert by["knowledge_update"].asked_at == day(2024, 4, 2)
    assert by["temporal_reasoning"].asked_at == day(2024, 6, 10)
    assert ds.categories[:3] == ("abstention", "contradiction_resolution", "event_ordering")
    # one conversation directory, or one size directory, work too
    assert len(beam_data.load(BEAM / "100K" / "2").questions) == 1
    assert len(beam_data.load(BEAM / "100K").questions) == 5


def test_judge_prompt_follows_the_question_kind():
    from bench.prompts import judge_messages

    ds = beam_data.load(BEAM)
    by = {q.category: q for q in ds.questions}
    abstain = judge_messages(by["abstention"], "x")[1]["content"]
    rubric = judge_messages(by["knowledge_update"], "x")[1]["content"]
    plain = judge_messages(answer_dataset(LOCOMO).questions[0], "x")[1]["content"]
    assert "cannot be answered" in abstain and "Rubric" not in abstain
    assert "Reference answer: Around 250ms due to caching optimizations" in rubric
    assert "- LLM response should state: 250ms" in rubric and "Gold answer" not in rubric
    assert "Gold answer: 7 May 2023" in plain and "Rubric" not in plain


# ------------------------------------------------------------------------------ the cache


class Counting:
    """A chat client stand-in that counts calls and answers from a script."""

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.calls: list[tuple[list[dict], bool]] = []

    def chat(self, messages, *, temperature=0.0, max_tokens=None, json_mode=False):
        self.calls.append((messages, json_mode))
        return ChatResult(self.texts.pop(0), "m", Usage(10, 2, 1), 5.0)


def test_cache_key_covers_model_prompt_and_params(tmp_path):
    msgs = [{"role": "user", "content": "hi"}]
    base = cache_key("m", msgs, temperature=0.0, max_tokens=None, json_mode=False)
    assert len({
        base,
        cache_key("m2", msgs, temperature=0.0, max_tokens=None, json_mode=False),
        cache_key("m", [{"role": "user", "content": "hi!"}], temperature=0.0, max_tokens=None,
                  json_mode=False),
        cache_key("m", msgs, temperature=0.5, max_tokens=None, json_mode=False),
        cache_key("m", msgs, temperature=0.0, max_tokens=10, json_mode=False),
        cache_key("m", msgs, temperature=0.0, max_tokens=None, json_mode=True),
    }) == 6
    client = Counting("hello")
    cache = CachedLLM(client, tmp_path, model="m")
    first = cache.chat(msgs)
    second = CachedLLM(Counting(), tmp_path, model="m").chat(msgs)  # a new process, same dir
    assert first == second and len(client.calls) == 1
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{base}.json"]
    entry = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert entry["request"]["messages"] == msgs and entry["result"]["text"] == "hello"
    with pytest.raises(KeyError, match="offline"):
        CachedLLM(None, tmp_path, model="m").chat([{"role": "user", "content": "new"}])


def test_cache_chat_json_reasks_then_raises(tmp_path):
    msgs = [{"role": "user", "content": "grade"}]
    client = Counting("nope", '{"reason": "ok", "label": "CORRECT"}')
    verdict, result = CachedLLM(client, tmp_path, model="m").chat_json(msgs, Verdict)
    assert verdict.correct and result.usage == Usage(20, 4, 2)
    assert [len(m) for m, _ in client.calls] == [1, 3] and all(j for _, j in client.calls)
    strict = Counting('{"reason": "x", "label": "MAYBE"}', '{"label": "WRONG"}')
    with pytest.raises(LLMResponseInvalid, match="did not answer valid JSON after 2 asks"):
        CachedLLM(strict, tmp_path / "b", model="m").chat_json(msgs, Verdict)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"reason": "x", "label": "CORRECT", "extra": 1}', type=Verdict)
