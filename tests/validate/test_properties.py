"""Property tests: offsets, units and the tie-break."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ragaudit.checks.validation import Context, validate_trace
from ragaudit.checks.validation.ranking import tiebreak_key
from ragaudit.core.types import Span
from ragaudit.io.traces import parse_trace


def payload(i, *, offsets=(0, 10), unit="char", score=0.5, section="s", snippet=None):
    return {
        "doc_id": "d",
        "section_id": section,
        "snippet_id": snippet or f"p{i}",
        "source_url": "u",
        "offsets": {"start": offsets[0], "end": offsets[1], "unit": unit},
        "tokens": 1,
        "index_hash": "h",
        "embed_model": "m",
        "analyzer": "custom",
        "rev": "r",
        "score_norm": score,
        "k_pos": i + 1,
    }


def trace(payloads):
    return {
        "qid": "Q",
        "variant": 0,
        "seed": 0,
        "retrieved": payloads,
        "index": {"index_hash": "h", "analyzer": "custom", "embed_model": "m"},
    }


def codes(t):
    return [i.code for i in validate_trace(parse_trace(t), Context())]


@given(st.integers(-5, 50), st.integers(-5, 50))
def test_bad_offsets_iff_not_ordered(start, end):
    found = codes(trace([payload(0, offsets=(start, end))]))
    assert ("bad_offsets" in found) == (not 0 <= start < end)


@given(st.integers(-5, 50), st.integers(-5, 50), st.sampled_from(["char", "token"]))
def test_list_and_object_offsets_agree(start, end, unit):
    as_object = trace([payload(0, offsets=(start, end), unit=unit)])
    as_list = trace([payload(0, offsets=(start, end), unit=unit)])
    as_list["retrieved"][0]["offsets"] = [start, end]
    as_list["offset_unit"] = unit
    assert codes(as_object) == codes(as_list)
    assert parse_trace(as_object).retrieved[0].offsets == parse_trace(as_list).retrieved[0].offsets


@given(st.text(min_size=1, max_size=8))
def test_unknown_units_are_bad_offsets(unit):
    found = codes(trace([payload(0, unit=unit)]))
    assert ("bad_offsets" in found) == (unit not in ("char", "token"))


@given(
    st.lists(
        st.tuples(st.sampled_from([0.2, 0.5, 0.9]), st.sampled_from("abc"), st.text("xyz", min_size=1, max_size=3)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[2],
    )
)
@settings(max_examples=200)
def test_spec_order_never_violates_and_a_swapped_tie_always_does(items):
    ordered = sorted(items, key=lambda t: (-t[0], t[1], t[2]))
    payloads = [payload(i, score=s, section=sec, snippet=snip) for i, (s, sec, snip) in enumerate(ordered)]
    assert "tiebreak_violation" not in codes(trace(payloads))
    for i in range(len(payloads) - 1):
        a, b = ordered[i], ordered[i + 1]
        if a[0] == b[0] and (a[1], a[2]) != (b[1], b[2]):
            swapped = list(ordered)
            swapped[i], swapped[i + 1] = b, a
            bad = [payload(j, score=s, section=sec, snippet=snip) for j, (s, sec, snip) in enumerate(swapped)]
            assert codes(trace(bad)).count("tiebreak_violation") == 1


@given(st.integers(0, 40), st.integers(1, 20), st.integers(0, 40), st.integers(1, 20), st.integers(0, 10))
def test_span_overlap_is_symmetric_and_widening_only_adds(a, la, b, lb, widen):
    x, y = Span(a, a + la), Span(b, b + lb)
    assert x.overlaps(y) == y.overlaps(x)
    assert x.overlaps(y, widen=widen) == y.overlaps(x, widen=widen)
    if x.overlaps(y):
        assert x.overlaps(y, widen=widen)
    assert x.overlaps(y) == bool(set(range(a, a + la)) & set(range(b, b + lb)))


def test_tiebreak_key_is_section_then_snippet():
    p = parse_trace(trace([payload(0, section="b", snippet="a")])).retrieved[0]
    assert tiebreak_key(p) == ("b", "a")
