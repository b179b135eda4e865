"""GraphRAG adapter (docs/reference.md §8): load an output folder of any layout, parse `[Data: …]` citations,
resolve them to text units and documents, report dangling ids, and optionally verify each claim
against its sources.

>>> trace = trace_answer("output/", "Scrooge is a miser [Data: Entities (3)].")  # doctest: +SKIP
>>> trace.dangling, trace.sources[0].documents  # doctest: +SKIP
"""

from ragaudit.adapters.graphrag.answers import RecordedAnswer, read_answers
from ragaudit.adapters.graphrag.cite import (
    Block,
    Citation,
    Claim,
    parse_blocks,
    split_claims,
)
from ragaudit.adapters.graphrag.load import GraphIndex, load_index
from ragaudit.adapters.graphrag.resolve import Resolution, Resolver
from ragaudit.adapters.graphrag.trace import (
    GraphRAGTrace,
    default_scorer,
    trace_answer,
    trace_file,
)

__all__ = [
    "Block",
    "Citation",
    "Claim",
    "GraphIndex",
    "GraphRAGTrace",
    "RecordedAnswer",
    "Resolution",
    "Resolver",
    "default_scorer",
    "load_index",
    "parse_blocks",
    "read_answers",
    "split_claims",
    "trace_answer",
    "trace_file",
]
