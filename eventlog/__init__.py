"""The event log: immutable, checksummed, hash-chained segments of msgspec-encoded events."""

from eventlog.events import (
    EVENT_TYPES,
    EmbeddingRecorded,
    EpisodeRecorded,
    Event,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
)
from eventlog.log import FSYNC_POLICIES, EventLog, FsyncPolicy, Recovery
from eventlog.repair import RepairReport, VerifyReport, repair_log, verify_log

__all__ = [
    "EVENT_TYPES",
    "EmbeddingRecorded",
    "EpisodeRecorded",
    "Event",
    "EventBase",
    "EventLog",
    "FSYNC_POLICIES",
    "FactForgotten",
    "FactRemembered",
    "FactRevised",
    "FsyncPolicy",
    "Recovery",
    "RepairReport",
    "VerifyReport",
    "repair_log",
    "verify_log",
]
