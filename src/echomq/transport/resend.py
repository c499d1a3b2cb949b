"""Which scripts the transport may send again when a reply was lost.

The rule is declared once per transition, with its reason, in
:mod:`echomq.transitions`; :data:`RESEND` is that table as the transport reads it and
:func:`resendable` applies it to an operation.
"""

from __future__ import annotations

from ..scripts import Cmd, Eval
from ..transitions import RESEND as RESEND


def resendable(op: Eval | Cmd) -> bool:
    """Whether ``op`` may be sent again after a write with no reply. A plain command
    is a read (plans send every write as a script)."""
    if isinstance(op, Cmd):
        return True
    return RESEND.get(op.script.name, False)
