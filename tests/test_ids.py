"""Branded job ids: shape, order, round trip, rejection, monotonic minting."""

from __future__ import annotations

import string
import types
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echomq import ids
from echomq.errors import InvalidJobId

ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase
values = st.integers(min_value=0, max_value=ids.MAX_VALUE)


def base62(value: int, width: int = 11) -> str:
    """An independent base62 encoder (so the tests do not trust the code under test)."""
    out = []
    for _ in range(width):
        value, rem = divmod(value, 62)
        out.append(ALPHABET[rem])
    assert value == 0, "does not fit the width"
    return "".join(reversed(out))


def test_alphabet_is_ascii_ordered() -> None:
    assert ids.ALPHABET == ALPHABET
    assert list(ALPHABET) == sorted(ALPHABET)


@given(values)
def test_encode_is_fourteen_bytes_and_matches_an_independent_base62(v: int) -> None:
    jid = ids.encode(v)
    assert len(jid.encode()) == 14
    assert jid == "JOB" + base62(v)


@given(values)
def test_round_trip(v: int) -> None:
    jid = ids.encode(v)
    assert ids.decode(jid) == v
    assert ids.validate(jid) is jid


@given(values, values)
def test_byte_order_is_numeric_order(a: int, b: int) -> None:
    ea, eb = ids.encode(a).encode(), ids.encode(b).encode()
    assert (ea < eb) == (a < b)
    assert (ea == eb) == (a == b)


def test_extremes() -> None:
    assert ids.encode(0) == "JOB00000000000"
    assert ids.decode("JOB00000000000") == 0
    assert ids.decode(ids.encode(ids.MAX_VALUE)) == 2**63 - 1


@given(st.integers(min_value=2**63, max_value=62**11 - 1))
def test_value_of_2_pow_63_or_more_is_refused(v: int) -> None:
    jid = "JOB" + base62(v)
    with pytest.raises(InvalidJobId):
        ids.decode(jid)
    with pytest.raises(InvalidJobId):
        ids.encode(v)


@pytest.mark.parametrize("v", [-1, 2**63, 2**64])
def test_encode_refuses_out_of_range(v: int) -> None:
    with pytest.raises(InvalidJobId):
        ids.encode(v)


@given(
    values, st.sampled_from(["", "J", "JO", "job", "Job", "JOb", "XYZ", "JOC", "JOBJOB", " JOB"])
)
def test_wrong_prefix_is_refused(v: int, prefix: str) -> None:
    with pytest.raises(InvalidJobId):
        ids.decode(prefix + base62(v))


@given(st.integers(min_value=0, max_value=30).filter(lambda w: w != 11), st.data())
def test_wrong_width_is_refused(width: int, data: st.DataObject) -> None:
    body = data.draw(st.text(alphabet=ALPHABET, min_size=width, max_size=width))
    with pytest.raises(InvalidJobId):
        ids.decode("JOB" + body)


@given(
    values,
    st.integers(min_value=0, max_value=10),
    st.characters().filter(lambda c: c not in ALPHABET),
)
def test_bad_character_is_refused(v: int, pos: int, bad: str) -> None:
    body = base62(v)
    with pytest.raises(InvalidJobId):
        ids.decode("JOB" + body[:pos] + bad + body[pos + 1 :])


@pytest.mark.parametrize(
    "bad",
    [
        None,
        42,
        b"JOB00000000000",
        "JOB00000000000\n",
        "JOB0000000000\u0661",  # an Arabic-Indic digit: a digit, but not base62
        "JOB0000000000\uff10",  # a fullwidth zero
        "JOB00000000000 ",
    ],
)
def test_non_strings_and_lookalikes_are_refused(bad: object) -> None:
    with pytest.raises(InvalidJobId):
        ids.validate(bad)  # type: ignore[arg-type]


def test_minted_ids_are_valid_strictly_increasing_and_carry_their_time() -> None:
    import time

    before = int(time.time() * 1000)
    minted = [ids.new_id() for _ in range(5000)]
    after = int(time.time() * 1000)
    assert all(ids.validate(j) for j in minted)
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)
    # a burst may borrow a few milliseconds ahead when the 4096 sequence is spent
    assert before <= ids.minted_at_ms(minted[0]) <= ids.minted_at_ms(minted[-1]) <= after + 5


def test_node_bits_are_carried() -> None:
    a, b = ids.IdMinter(node=1), ids.IdMinter(node=2)
    va, vb = ids.decode(a.mint()), ids.decode(b.mint())
    assert (va >> ids.SEQ_BITS) & 1023 == 1
    assert (vb >> ids.SEQ_BITS) & 1023 == 2


def test_node_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMQ_NODE", "7")
    v = ids.decode(ids.IdMinter().mint())
    assert (v >> ids.SEQ_BITS) & 1023 == 7


class FakeClock:
    """Stands in for the ``time`` module inside :mod:`echomq.ids`."""

    def __init__(self, seconds: Iterator[float]) -> None:
        self._seconds = seconds

    def time(self) -> float:
        return next(self._seconds)


def _with_clock(monkeypatch: pytest.MonkeyPatch, seconds: list[float]) -> ids.IdMinter:
    monkeypatch.setattr(ids, "time", types.SimpleNamespace(time=FakeClock(iter(seconds)).time))
    return ids.IdMinter(node=3)


@settings(max_examples=60)
@given(
    st.lists(
        st.integers(min_value=ids.EPOCH_MS, max_value=ids.EPOCH_MS + 10**6),
        min_size=2,
        max_size=80,
    )
)
def test_monotonic_when_the_clock_steps_back(clock_ms: list[int]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        minter = _with_clock(mp, [ms / 1000 for ms in clock_ms])
        minted = [minter.mint() for _ in clock_ms]
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)
    # the minted time never runs behind the latest clock reading seen
    for jid, seen in zip(minted, clock_ms):
        assert ids.minted_at_ms(jid) >= seen - 1  # float ms rounding


def test_clock_step_back_keeps_counting_on_the_last_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t0 = (ids.EPOCH_MS + 1_000_000) / 1000
    minter = _with_clock(monkeypatch, [t0, t0 - 5.0, t0 - 5.0])
    a, b, c = minter.mint(), minter.mint(), minter.mint()
    assert a < b < c
    assert ids.minted_at_ms(a) == ids.minted_at_ms(b) == ids.minted_at_ms(c)
    assert [ids.decode(x) & 0xFFF for x in (a, b, c)] == [0, 1, 2]


def test_spent_sequence_borrows_the_next_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = (ids.EPOCH_MS + 2_000_000) / 1000
    n = (1 << ids.SEQ_BITS) + 3
    minter = _with_clock(monkeypatch, [t0] * n)
    minted = [minter.mint() for _ in range(n)]
    assert minted == sorted(minted) and len(set(minted)) == n
    first_ms = ids.minted_at_ms(minted[0])
    assert ids.minted_at_ms(minted[(1 << ids.SEQ_BITS) - 1]) == first_ms
    assert ids.minted_at_ms(minted[-1]) == first_ms + 1


@settings(max_examples=40)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=ids.EPOCH_MS, max_value=ids.EPOCH_MS + 10**5),
            st.integers(min_value=1, max_value=300),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_mint_many_is_monotonic_and_matches_encode(steps: list[tuple[int, int]]) -> None:
    # each step reads the clock once and mints a batch; the clock may step back
    with pytest.MonkeyPatch.context() as mp:
        minter = _with_clock(mp, [ms / 1000 for ms, _ in steps])
        minted: list[str] = []
        for _, count in steps:
            batch = minter.mint_many(count)
            assert len(batch) == count
            minted.extend(batch)
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)
    assert all(ids.encode(ids.decode(j)) == j for j in minted)
    values = [ids.decode(j) for j in minted]
    assert all((v >> ids.SEQ_BITS) & 1023 == 3 for v in values)


def test_mint_many_crosses_encoding_blocks_and_milliseconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 62**3 does not divide the snowflake layout: a batch spans several tail blocks
    t0 = (ids.EPOCH_MS + 3_000_000) / 1000
    minter = _with_clock(monkeypatch, [t0, t0, t0])
    first = minter.mint_many(3 * 4096 + 5)
    after = minter.mint()
    assert first == sorted(first) and first[-1] < after
    assert [ids.decode(j) for j in first] == sorted(ids.decode(j) for j in first)
    assert all(ids.encode(ids.decode(j)) == j for j in first)
    assert ids.minted_at_ms(first[-1]) == ids.minted_at_ms(first[0]) + 3
    assert ids.new_ids(0) == []
