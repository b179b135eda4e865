"""Every fault class `ragaudit faults` and `ragaudit calibrate` inject, by name: the payload and
retrieval faults, the answer-style faults, and the negative controls (which the gate must pass)."""

from __future__ import annotations

from ragaudit.flows.injection.answers import ANSWER_FAULTS
from ragaudit.flows.injection.mutations import PAYLOAD_FAULTS, Fault

FAULTS: dict[str, Fault] = {f.name: f for f in (*PAYLOAD_FAULTS, *ANSWER_FAULTS)}
CONTROLS = tuple(name for name, f in FAULTS.items() if f.control)


def fault_names(only: str) -> list[str]:
    """The faults a comma-separated `--only` names; a UsageError naming the choices for any other."""
    from ragaudit.core.errors import UsageError

    names = [n.strip() for n in only.split(",")]
    if not all(names) or any(n not in FAULTS for n in names):
        raise UsageError(f"--only: expected comma-separated fault names (some of {', '.join(FAULTS)}), found {only!r}")
    return names
