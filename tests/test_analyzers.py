from hypothesis import given
from hypothesis import strategies as st

from ragaudit.core.analyzers import ANALYZERS, get_analyzer


def test_documented_analyzers():
    text = "Die Schlüssel-Rotation: every 12 MONTHS, café."
    assert ANALYZERS["whitespace"].terms(text) == ["Die", "Schlüssel-Rotation:", "every", "12", "MONTHS,", "café."]
    assert ANALYZERS["lowercase"].terms(text) == ["die", "schlüssel", "rotation", "every", "12", "months", "café"]
    assert ANALYZERS["lowercase+ascii_fold"].terms(text) == [
        "die",
        "schlussel",
        "rotation",
        "every",
        "12",
        "months",
        "cafe",
    ]
    assert get_analyzer("bert-wordpiece") is None and get_analyzer(None) is None


@given(st.text(max_size=60), st.sampled_from(sorted(ANALYZERS)))
def test_spans_cover_the_terms_in_order(text, name):
    analyzer = ANALYZERS[name]
    spans = analyzer.spans(text)
    assert len(spans) == analyzer.count(text) == len(analyzer.terms(text))
    assert all(0 <= a < b <= len(text) for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))
    assert [analyzer.normalize(text[a:b]) for a, b in spans] == analyzer.terms(text)
