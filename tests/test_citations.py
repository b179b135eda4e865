from click.testing import CliRunner

from ragaudit.cli.commands import main
from ragaudit.io.traces import parse_trace
from ragaudit.outputs.citations import (
    CitationRecord,
    Hit,
    render_claims,
    render_record,
    source_markdown,
)

WEB = Hit("w1", title="Key rotation [NIST]", url="https://nist.example/keys")
KB = Hit("k1", collection="handbook", file="security/keys.md", section_id="security/keys", page=3)


def test_sources_by_kind():
    assert source_markdown(WEB) == "[Key rotation \\[NIST\\]](https://nist.example/keys)"
    assert source_markdown(KB) == "handbook / security/keys.md § security/keys (p. 3)"
    assert source_markdown(KB, base_url="https://wiki.example/") == (
        "[handbook / security/keys.md](https://wiki.example/handbook/security/keys.md#keys) § security/keys (p. 3)"
    )


def test_citation_format():
    assert CitationRecord("q", (WEB,)).citation_format == "web_urls"
    assert CitationRecord("q", (KB,)).citation_format == "internal_kb"
    assert CitationRecord("q", (WEB, KB)).citation_format == "mixed"


def test_claims_become_numbered_inline_footnotes():
    record = CitationRecord("q", (WEB, KB))
    out = render_claims([("Keys rotate yearly.", ["k1"]), ("NIST agrees", ["w1", "k1", "ghost"])], record)
    assert out == (
        "Keys rotate yearly[^1]. NIST agrees[^2][^1]\n\n"
        "[^1]: handbook / security/keys.md § security/keys (p. 3)\n"
        "[^2]: [Key rotation \\[NIST\\]](https://nist.example/keys)\n"
    )


def test_record_lists_sources_with_scores():
    record = CitationRecord(
        "How often?", (Hit("a", url="https://x.example", score=0.5),), "2026-01-01T00:00:00Z", "bm25"
    )
    assert render_record(record) == (
        "**Query:** How often?\n\n_retriever bm25, retrieved 2026-01-01T00:00:00Z, "
        "format web_urls_\n\n**Sources**\n\n1. [https://x.example](https://x.example) — score 0.500\n"
    )


def test_trace_file_urls_become_collection_and_file(valid_trace):
    valid_trace["retrieved"][0]["source_url"] = "file:///srv/handbook/policies.md#policies/security/keys"
    record = CitationRecord.from_trace(parse_trace(valid_trace))
    assert (record.hits[0].collection, record.hits[0].file) == ("handbook", "policies.md")
    assert record.citation_format == "internal_kb"


def test_cite_command(tmp_path, valid_trace):
    import json

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(valid_trace) + "\n")
    result = CliRunner().invoke(main, ["cite", str(path)])
    assert result.exit_code == 0
    assert "Hardware keys are rotated every 12 months[^1]." in result.output
    assert "**Sources**" in result.output
