"""Every fault class `ragaudit faults` and `ragaudit calibrate` inject, by name: the payload and
retrieval faults, the answer-style faults, and the negative controls (which the gate must pass)."""

from __future__ import annotations

from ragaudit.injection.answers import ANSWER_FAULTS
from ragaudit.injection.mutations import PAYLOAD_FAULTS, Fault

FAULTS: dict[str, Fault] = {f.name: f for f in (*PAYLOAD_FAULTS, *ANSWER_FAULTS)}
CONTROLS = tuple(name for name, f in FAULTS.items() if f.control)
