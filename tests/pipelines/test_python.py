from pathlib import Path

import pytest

from ragaudit.core.errors import PipelineStartError
from ragaudit.core.types import LiveIndex
from ragaudit.pipelines.base import Request
from ragaudit.pipelines.python import PythonPipeline

FIXTURES = Path(__file__).parent / "fixtures"
TOY_INDEX = LiveIndex("sha256:toy", "lowercase", "none", "toy")


@pytest.fixture(autouse=True)
def fixtures_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))


def request(query="How often are keys rotated?", qid="SEC-KEYS-1", variant=2, seed=7, k=3) -> Request:
    return Request(qid=qid, variant=variant, seed=seed, query=query, k=k)


def test_run_keys_the_trace_by_the_request_and_passes_options():
    pipeline = PythonPipeline("mine", "toy_rag:make", {"prefix": "A: "})
    trace = pipeline.run(request())
    assert (trace.qid, trace.variant, trace.seed, trace.config) == ("SEC-KEYS-1", 2, 7, "mine")
    assert trace.error is None and trace.retriever_name == "toy"
    assert trace.answer.text == "A: How often are keys rotated?"
    assert trace.index == TOY_INDEX and pipeline.index_info() == TOY_INDEX
    assert pipeline.target.calls == [("How often are keys rotated?", 7, 3)]


def test_index_info_may_be_a_live_index():
    pipeline = PythonPipeline("mine", "toy_rag:make_with_live_index")
    assert pipeline.index_info() == LiveIndex(index_hash="sha256:live", analyzer="lowercase")


def test_an_exception_in_run_becomes_an_error_trace():
    trace = PythonPipeline("mine", "toy_rag:make").run(request("explode"))
    assert trace.error == "RuntimeError: index shard 2 is offline"
    assert (trace.qid, trace.config, trace.index) == ("SEC-KEYS-1", "mine", TOY_INDEX)


def test_output_that_is_not_a_trace_becomes_an_error_trace():
    trace = PythonPipeline("mine", "toy_rag:make").run(request("not a trace"))
    assert trace.error == "expected a trace object, found array of 2"


def test_a_bad_index_info_fails_the_run_not_the_runner():
    pipeline = PythonPipeline("mine", "toy_rag:make", {"index": ["sha256:x"]})
    trace = pipeline.run(request())
    assert trace.error == (
        "TypeError: index_info() must return None, a dict {index_hash, analyzer, embed_model, "
        "store} or an object with those attributes (a LiveIndex or an IndexInfo), "
        "found array of 1"
    )
    assert pipeline.index_info() is None


def test_close_closes_the_target_and_keeps_the_last_index():
    pipeline = PythonPipeline("mine", "toy_rag:make")
    pipeline.run(request())
    pipeline.close()
    pipeline.close()
    assert pipeline.target.closed and pipeline.index_info() == TOY_INDEX


@pytest.mark.parametrize(
    "factory,message",
    [
        (
            "no_such_module_xyz:make",
            "pipeline 'mine': cannot import module 'no_such_module_xyz' for factory "
            "'no_such_module_xyz:make': ModuleNotFoundError: No module named 'no_such_module_xyz'",
        ),
        ("toy_rag:missing", "pipeline 'mine': module 'toy_rag' has no attribute 'missing' (factory 'toy_rag:missing')"),
        ("toy_rag:NOT_CALLABLE", "pipeline 'mine': factory 'toy_rag:NOT_CALLABLE' must be callable, found number 3"),
        (
            "toy_rag:make_broken",
            "pipeline 'mine': factory 'toy_rag:make_broken' failed when called with options []: "
            "ConnectionError: vector store at localhost:6333 refused the connection",
        ),
        (
            "toy_rag:make_without_run",
            "pipeline 'mine': factory 'toy_rag:make_without_run' must return an object "
            "with run(query, *, seed, k), found object without run",
        ),
        (":make", "pipeline 'mine': factory must be \"module:callable\", found ':make'"),
        ("toy_rag:", "pipeline 'mine': factory must be \"module:callable\", found 'toy_rag:'"),
        (
            "",
            "pipeline 'mine': factory must be \"module:callable\" or an entry-point name in group "
            "'ragaudit.pipelines', found string ''",
        ),
    ],
)
def test_bad_factories_cannot_start(factory, message):
    with pytest.raises(PipelineStartError) as caught:
        PythonPipeline("mine", factory)
    assert str(caught.value) == message and caught.value.exit_code == 4


def test_options_the_factory_does_not_take_cannot_start():
    with pytest.raises(PipelineStartError, match=r"failed when called with options \['colour'\]: TypeError: "):
        PythonPipeline("mine", "toy_rag:make", {"colour": "blue"})


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A real distribution on sys.path declaring `ragaudit.pipelines` entry points."""

    def install(entry_points: str) -> None:
        dist = tmp_path / "fake_pkg-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pkg\nVersion: 0.1\n", encoding="utf-8")
        (dist / "entry_points.txt").write_text(f"[ragaudit.pipelines]\n{entry_points}\n", encoding="utf-8")
        monkeypatch.syspath_prepend(str(tmp_path))

    return install


def test_a_bare_name_is_an_entry_point(installed):
    installed("mine = toy_rag:make")
    trace = PythonPipeline("p", "mine", {"prefix": "ep: "}).run(request("q"))
    assert trace.error is None and trace.answer.text == "ep: q" and trace.config == "p"


def test_an_unknown_entry_point_lists_the_installed_ones(installed):
    installed("mine = toy_rag:make\nyours = toy_rag:make")
    with pytest.raises(PipelineStartError) as caught:
        PythonPipeline("p", "theirs")
    message = str(caught.value)
    assert message.startswith("pipeline 'p': no entry point 'theirs' in group 'ragaudit.pipelines' (available: ")
    assert "mine, " in message and "yours" in message and message.endswith('write the factory as "module:callable"')


def test_an_entry_point_that_cannot_load_cannot_start(installed):
    installed("broken = no_such_module_xyz:make")
    with pytest.raises(
        PipelineStartError, match="cannot load entry point 'broken' = 'no_such_module_xyz:make': ModuleNotFoundError"
    ):
        PythonPipeline("p", "broken")
