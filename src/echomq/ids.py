"""Branded job ids: ``JOB`` + 11 base62 characters of a 63-bit snowflake.

The snowflake packs, from the top: 41 bits of milliseconds since :data:`EPOCH_MS`,
10 node bits and 12 sequence bits. Base62 uses ``0-9A-Za-z`` (ASCII order) at a fixed
width, so byte order equals numeric order equals mint order: a sorted set at one score
lists oldest first and browses newest first by lex range, with no second index. (The
backlogs run in enqueue order, not id order: :data:`echomq.schema.SEQ_SPAN`.)
"""

from __future__ import annotations

import os
import re
import threading
import time

from .checks import show
from .errors import InvalidJobId

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
PREFIX = "JOB"
WIDTH = 11
EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
NODE_BITS = 10
SEQ_BITS = 12
MAX_VALUE = (1 << 63) - 1
_INDEX = {c: i for i, c in enumerate(ALPHABET)}
_SHAPE = re.compile(r"JOB[0-9A-Za-z]{11}")
# Two base62 digits per lookup: encoding is on the enqueue hot path (one id per job).
_PAIRS = [a + b for a in ALPHABET for b in ALPHABET]
_PAIR_BASE = 62 * 62
_TAIL_BASE = 62 * 62 * 62
_SEQ_MASK = (1 << SEQ_BITS) - 1


def encode(value: int) -> str:
    """Encode a 63-bit integer as a branded id.

    Raises:
        InvalidJobId: the value is negative or does not fit in 63 bits.
    """
    if not 0 <= value <= MAX_VALUE:
        raise InvalidJobId(f"snowflake out of range: {value}")
    pairs = _PAIRS
    value, p0 = divmod(value, _PAIR_BASE)
    value, p1 = divmod(value, _PAIR_BASE)
    value, p2 = divmod(value, _PAIR_BASE)
    value, p3 = divmod(value, _PAIR_BASE)
    top, p4 = divmod(value, _PAIR_BASE)  # top < 62: 2**63 < 62**11
    return PREFIX + ALPHABET[top] + pairs[p4] + pairs[p3] + pairs[p2] + pairs[p1] + pairs[p0]


def decode(job_id: str) -> int:
    """Return the snowflake inside a branded id.

    Raises:
        InvalidJobId: the id is not ``JOB`` + 11 base62 characters below 2**63.
    """
    if not isinstance(job_id, str) or _SHAPE.fullmatch(job_id) is None:
        raise InvalidJobId(f"not a job id: {show(job_id)}")
    value = 0
    for c in job_id[3:]:
        value = value * 62 + _INDEX[c]
    if value > MAX_VALUE:
        raise InvalidJobId(f"job id out of range: {show(job_id)}")
    return value


def validate(job_id: str) -> str:
    """Return ``job_id`` unchanged if it is a well-formed branded id.

    Raises:
        InvalidJobId: it is not.
    """
    decode(job_id)
    return job_id


def minted_at_ms(job_id: str) -> int:
    """The wall-clock millisecond at which ``job_id`` was minted."""
    return (decode(job_id) >> (NODE_BITS + SEQ_BITS)) + EPOCH_MS


class IdMinter:
    """Mints strictly increasing ids in this process, even if the clock steps back.

    Args:
        node: 0..1023, distinguishes processes minting in the same millisecond.
            Defaults to ``EMQ_NODE`` from the environment, else a random value.
    """

    def __init__(self, node: int | None = None) -> None:
        if node is None:
            env = os.environ.get("EMQ_NODE")
            node = int(env) if env else int.from_bytes(os.urandom(2), "big")
        self._node = node & ((1 << NODE_BITS) - 1)
        self._node_bits = self._node << SEQ_BITS
        self._last_ms = 0
        self._seq = 0
        self._lock = threading.Lock()
        # (value // 62**3, its encoding but the last three characters): ids minted in
        # the same millisecond share it; one attribute, so a thread reads a whole pair
        self._head: tuple[int, str] = (-1, "")

    def _reserve(self, n: int) -> int:
        """Claim ``n`` consecutive (millisecond, sequence) slots; return the first as
        ``ms << SEQ_BITS | seq``. Slot ``k`` is that value plus ``k``: a spent
        sequence carries into the next millisecond."""
        with self._lock:
            now = int(time.time() * 1000) - EPOCH_MS
            if now > self._last_ms:
                first = now << SEQ_BITS
            else:
                # Same millisecond or the clock stepped back: keep counting on the last
                # millisecond, borrowing the next one when the sequence is spent.
                first = ((self._last_ms << SEQ_BITS) | self._seq) + 1
            last = first + n - 1
            self._last_ms, self._seq = last >> SEQ_BITS, last & _SEQ_MASK
            return first

    def _value(self, slot: int) -> int:
        value = (
            ((slot >> SEQ_BITS) << (NODE_BITS + SEQ_BITS)) | self._node_bits | (slot & _SEQ_MASK)
        )
        if value > MAX_VALUE:
            raise InvalidJobId(f"snowflake out of range: {value}")
        return value

    def mint(self) -> str:
        """Return a new id, greater than every id this minter returned before."""
        # one id per enqueue: the head of the last millisecond's ids is encoded once
        high, low = divmod(self._value(self._reserve(1)), _TAIL_BASE)
        head = self._head
        if head[0] != high:
            head = self._head = (high, encode(high * _TAIL_BASE)[:-3])
        pair, last = divmod(low, 62)
        return head[1] + _PAIRS[pair] + ALPHABET[last]

    def mint_many(self, n: int) -> list[str]:
        """Return ``n`` new ids in increasing order, each greater than every id this
        minter returned before (one clock read and one lock for the lot)."""
        if n <= 0:
            return []
        first = self._reserve(n)
        out: list[str] = []
        head_of, head = -1, ""
        for slot in range(first, first + n):
            # Ids minted together share all but their last three characters: encode
            # the head once per block and only the tail per id.
            high, low = divmod(self._value(slot), _TAIL_BASE)
            if high != head_of:
                head_of, head = high, encode(high * _TAIL_BASE)[:-3]
            pair, last = divmod(low, 62)
            out.append(head + _PAIRS[pair] + ALPHABET[last])
        return out


_default = IdMinter()


def new_id() -> str:
    """Mint a new branded id from the process-wide minter."""
    return _default.mint()


def new_ids(n: int) -> list[str]:
    """Mint ``n`` new branded ids, in increasing order, from the process-wide minter."""
    return _default.mint_many(n)
