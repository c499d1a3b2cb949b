"""The error tree, the reply-code table, and typed refusals coming back from the server."""

from __future__ import annotations

import pytest
import redis

import echomq
from conftest import dump
from echomq import errors
from echomq.errors import (
    REASONS,
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidName,
    JobGone,
    JobLocked,
    JobNotActive,
    JobNotDead,
    JobNotFinished,
    JobNotPending,
    JobNotScheduled,
    JobNotWaiting,
    QueueHasActiveJobs,
    QueueNotPaused,
    Refused,
    ScriptError,
    ServerUnavailable,
    StaleToken,
    VersionMismatch,
    from_reply,
)
from echomq.replies import error, refusal

REFUSALS = {
    JobGone: "gone",
    JobLocked: "locked",
    JobNotDead: "not_dead",
    JobNotPending: "not_pending",
    JobNotScheduled: "not_scheduled",
    JobNotActive: "not_active",
    JobNotFinished: "not_finished",
    JobNotWaiting: "not_waiting",
    QueueNotPaused: "not_paused",
    QueueHasActiveJobs: "active",
    StaleToken: "stale",
}


def test_the_tree() -> None:
    for cls in (
        InvalidName,
        InvalidJobId,
        InvalidArgument,
        VersionMismatch,
        ScriptError,
        ServerUnavailable,
        Refused,
    ):
        assert issubclass(cls, EchoMQError)
    for cls, reason in REFUSALS.items():
        assert issubclass(cls, Refused)
        assert cls.reason == reason
        assert cls().reason == reason
    # gate errors are also ValueErrors, so generic callers can catch them
    for cls in (InvalidName, InvalidJobId, InvalidArgument):
        assert issubclass(cls, ValueError)
        assert not issubclass(cls, Refused)
    assert not issubclass(VersionMismatch, Refused)
    assert not issubclass(ScriptError, Refused)


def test_reasons_list_every_refusal_once() -> None:
    assert sorted(REASONS) == sorted(REFUSALS.values())
    assert len(set(REASONS)) == len(REASONS)


def test_refusal_carries_job_id_and_message() -> None:
    e = JobGone("job X is gone", job_id="JOB00000000001")
    assert e.job_id == "JOB00000000001"
    assert str(e) == "job X is gone"
    assert str(StaleToken()) == "stale"


def test_exported_from_the_package() -> None:
    for cls in (*REFUSALS, EchoMQError, Refused, InvalidName, InvalidJobId, VersionMismatch):
        assert getattr(echomq, cls.__name__) is cls
    assert echomq.ScriptError is ScriptError


def test_module_docstring_draws_the_tree() -> None:
    doc = errors.__doc__ or ""
    for cls, reason in REFUSALS.items():
        assert cls.__name__ in doc and reason in doc


def error_classes() -> list[type[BaseException]]:
    """Every exception class defined in echomq/errors.py."""
    return [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, BaseException) and c.__module__ == errors.__name__
    ]


def drawn_tree() -> dict[str, str]:
    """The docstring's drawing of the tree, as each class's drawn parent."""
    doc = errors.__doc__ or ""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name) on the path
    for line in doc.splitlines():
        if "── " in line:  # a branch: the name follows it
            col = line.index("── ") + 3
        elif line.strip() == "EchoMQError":  # the root
            col = line.index("EchoMQError")
        else:
            continue
        name = line[col:].split()[0]
        while stack and stack[-1][0] >= col:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((col, name))
    return parents


def test_the_drawing_is_the_tree() -> None:
    drawn = drawn_tree()
    defined = {c.__name__ for c in error_classes()} - {"EchoMQError"}
    # every class of errors.py is drawn (the worker's JobCancelled and JobFailure too),
    # nothing else
    assert set(drawn) == defined | {"JobCancelled", "JobFailure"}
    for name, parent in drawn.items():
        cls = getattr(errors, name, None) or getattr(echomq, name)
        assert getattr(errors, parent) in cls.__bases__, (name, parent)


def test_every_error_class_is_exported() -> None:
    for cls in error_classes():
        assert cls.__name__ in echomq.__all__, cls
        assert getattr(echomq, cls.__name__) is cls
    for name in ("OutcomeUnknown", "ServerFull", "EnqueuePartial", "NativeUnavailable"):
        assert name in echomq.__all__


def test_native_unavailable_keeps_its_old_path() -> None:
    from echomq.native import NativeUnavailable

    assert NativeUnavailable is errors.NativeUnavailable
    assert issubclass(NativeUnavailable, EchoMQError)


@pytest.mark.parametrize(
    ("message", "cls"),
    [
        ("EMQLOCK job JOB0ST4LqsNJcO is locked", JobLocked),
        ("EMQSTALE token 3 is not current", StaleToken),
        ("EMQSTATE not dead", JobNotDead),
        ("EMQSTATE not pending", JobNotPending),
        ("EMQSTATE not paused", QueueNotPaused),
        ("EMQSTATE active jobs present", QueueHasActiveJobs),
    ],
)
def test_from_reply_maps_each_code(message: str, cls: type[EchoMQError]) -> None:
    got = from_reply(message)
    assert type(got) is cls
    assert str(got) == message


def test_codes_match_exactly_never_by_prefix() -> None:
    # a fixed message is its own code: more words after it are not that refusal
    for code in ("EMQSTATE not dead", "EMQSTATE not paused", "EMQSTATE active jobs present"):
        assert from_reply(code + " trailing words") is None
    assert from_reply("EMQSTATE active") is None
    assert from_reply("EMQSTATE") is None
    # a code that carries details is its first word, exactly
    assert type(from_reply("EMQSTALE")) is StaleToken
    assert from_reply("EMQSTALEX token 1") is None


def test_unknown_replies_are_not_ours() -> None:
    assert from_reply("ERR unknown command") is None
    assert from_reply("WRONGTYPE Operation against a key") is None
    assert from_reply("emqstale lower case") is None
    mapped = error(redis.ResponseError("ERR something broke"))
    assert type(mapped) is ScriptError and "something broke" in str(mapped)
    assert type(error(redis.ResponseError("EMQSTALE token 1"))) is StaleToken


def test_one_reader_types_every_error_reply() -> None:
    # the server's own refusal over maxmemory, whose code redis-py takes off
    full = error(redis.exceptions.OutOfMemoryError("command not allowed when used memory"))
    assert type(full) is errors.ServerFull and str(full).startswith("OOM ")
    # a cluster reply: the command did not run there
    moved = error(redis.exceptions.MovedError("3999 127.0.0.1:6381"))
    assert type(moved) is ServerUnavailable and str(moved).startswith("MOVED ")
    # a refusal carries the job it was about
    locked = error(redis.ResponseError("EMQLOCK job is locked"), "JOB00000000001")
    assert type(locked) is JobLocked and locked.job_id == "JOB00000000001"
    # a reason answered per job by a batch verb reads as the same refusal classes
    for cls, reason in REFUSALS.items():
        got = refusal("JOB00000000001", reason)
        assert type(got) is cls and got.job_id == "JOB00000000001"
        assert str(got) == f"job JOB00000000001: {reason}"


def test_server_refusals_arrive_typed(q: echomq.Queue, r: redis.Redis) -> None:
    jid = q.enqueue("x")
    c = q.claim()
    assert c is not None
    before = dump(r, q)
    with pytest.raises(StaleToken) as stale:
        q.complete(jid, c.token + 1)
    assert stale.value.reason == "stale"
    gone_id = echomq.new_id()
    with pytest.raises(JobGone) as gone:
        q.complete(gone_id, 1)
    assert gone.value.reason == "gone" and gone.value.job_id == gone_id
    assert dump(r, q) == before
