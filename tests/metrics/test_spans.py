from hypothesis import given
from hypothesis import strategies as st

from ragaudit.checks.metrics.spans import intersection_length, length, merge

intervals = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 15)).map(lambda t: (t[0], t[0] + t[1])), max_size=8)


def points(spans):
    return {x for s, e in spans for x in range(s, e)}


@given(intervals)
def test_merge_is_the_union_without_double_counting(spans):
    merged = merge(spans)
    assert length(merged) == len(points(spans))
    assert all(a[1] < b[0] for a, b in zip(merged, merged[1:]))


@given(intervals, intervals)
def test_intersection_length_matches_points(a, b):
    assert intersection_length(merge(a), merge(b)) == len(points(a) & points(b))
    assert intersection_length(merge(a), merge(b)) == intersection_length(merge(b), merge(a))


def test_touching_intervals_merge():
    assert merge([(5, 8), (0, 5), (9, 10)]) == [(0, 8), (9, 10)]
