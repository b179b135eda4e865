import json
import re
from pathlib import Path

import pytest
from helpers import RegexReads, shared_path
from hypothesis import given, settings
from hypothesis import strategies as st

from ragaudit.checks.metrics.quantities import Mention, hallucinated, mentions

ROOT = Path(__file__).resolve().parents[2]


def keys(text: str) -> list[tuple[str, str]]:
    return [(m.kind, m.key) for m in mentions(text)]


# ---------------------------------------------------------------- what is read, and as what


@pytest.mark.parametrize(
    "written, key",
    [
        ("$1,499", "1499"),
        ("1499", "1499"),
        ("1499.0", "1499"),
        ("1,499.00", "1499"),
        ("€2,000,000", "2000000"),
        ("0.50", "0.5"),
        (".5", "0.5"),
        ("007", "7"),
        ("2019", "2019"),
        ("-18", "18"),
        ("21st", "21"),
        ("1990s", "1990"),
        ("3x", "3"),
        ("1.5 million", "1500000"),
        ("3 Billion", "3000000000"),
        ("$5m", "5000000"),
        ("5k", "5000"),
        ("3.10.2", "3.10.2"),
        ("USD 500", "500"),
        ("12%", "12 percent"),
        ("12 %", "12 percent"),
        ("12 percent", "12 percent"),
        ("12 per cent", "12 percent"),
        ("12 days", "12 day"),
        ("12-day", "12 day"),
        ("12 Days", "12 day"),
        ("5 business days", "5 day"),
        ("10-year-old", "10 year"),
        ("100mg", "100 mg"),
        ("1.5 mg/kg", "1.5 mg"),
        ("8 GB", "8 gb"),
        ("512GB", "512 gb"),
        ("-18°C", "18 celsius"),
        ("98.6 °F", "98.6 fahrenheit"),
        ("800 milliseconds", "800 millisecond"),
        ("1.5 billion years", "1500000000 year"),
        ("10:00", "10:00"),
        ("3 pm", "15:00"),
        ("3:30 p.m.", "15:30"),
    ],
)
def test_a_number_is_read_with_its_value_and_unit(written, key):
    assert keys(f"It was {written} then.") == [("number", key)]


@pytest.mark.parametrize(
    "written",
    [
        "2024-03-01",
        "March 1, 2024",
        "1 March 2024",
        "Mar. 1st, 2024",
        "1st of March 2024",
        "2024/03/01",
        "March 1 2024",
    ],
)
def test_one_date_written_many_ways_has_one_key(written):
    assert keys(f"Signed on {written}.") == [("date", "2024-03-01")]


@pytest.mark.parametrize("written, key", [("March 2024", "2024-03"), ("May 5th", "--05-05"), ("5 May", "--05-05")])
def test_partial_dates(written, key):
    assert keys(f"Due {written}.") == [("date", key)]


@pytest.mark.parametrize(
    "written, key",
    [
        ("FIDO2", "fido2"),
        ("FIDO 2", "fido2"),
        ("AES-256", "aes256"),
        ("AES 256", "aes256"),
        ("SHA-256", "sha256"),
        ("TLS 1.3", "tls1.3"),
        ("TLSv1.3", "tls1.3"),
        ("TLS version 1.3", "tls1.3"),
        ("ISO 27001", "iso27001"),
        ("SEV1", "sev1"),
        ("SEV 1", "sev1"),
        ("P0", "p0"),
        ("v3.2", "v3.2"),
        ("version 3.2", "v3.2"),
        ("IPv6", "ip6"),
        ("COVID-19", "covid19"),
        ("COVID-19-related", "covid19"),
        ("H2O", "h2o"),
        ("5G", "5g"),
        ("p99", "p99"),
        ("eu-west-1", "euwest1"),
        ("1Password", "1password"),
        ("CVSS 9.0", "cvss9.0"),
    ],
)
def test_codes_with_digits_are_identifiers(written, key):
    assert keys(f"We use {written} here.") == [("identifier", key)]


def test_mentions_carry_their_span():
    text = "Keys (FIDO2) last 12 months, since March 1, 2024."
    found = mentions(text)
    assert [(m.surface, m.kind) for m in found] == [
        ("FIDO2", "identifier"),
        ("12 months", "number"),
        ("March 1, 2024", "date"),
    ]
    assert all(text[m.start : m.end] == m.surface for m in found)
    assert found[0] == Mention(6, 11, "FIDO2", "identifier", "fido2")


def test_markers_and_list_numbering_are_not_mentions():
    text = (
        "1. Keys rotate often [3] [1, 2] [pol-keys-1] [hb24-sec-keys-0007] [Data: Reports (4, 7)].\n"
        "2) Passwords too 【12】.\n  3. And tokens.\n4[1]."
    )
    assert mentions(text) == []


def test_a_range_or_list_shares_its_unit():
    assert keys("between 10 and 12 days") == [("number", "10 day"), ("number", "12 day")]
    assert keys("50-70% of it") == [("number", "50 percent"), ("number", "70 percent")]
    assert keys("3, 6 or 12 months") == [("number", "3 month"), ("number", "6 month"), ("number", "12 month")]
    # a clause or a pair is not a range
    assert keys("In 2019, 12 days later") == [("number", "2019"), ("number", "12 day")]
    assert keys("5 and 7 days") == [("number", "5"), ("number", "7 day")]


# ---------------------------------------------------------------- hallucinated


@pytest.mark.parametrize(
    "segment, cited, expected",
    [
        # units
        ("Refunds take 12 days.", ["Refunds take 12 weeks."], ["12 days"]),
        ("Refunds take 12 days.", ["Refunds take twelve days."], []),
        ("Refunds take 12 days.", ["a 12-day refund window"], []),
        ("Refunds take 12 days.", ["within 12 calendar days"], []),
        ("Refunds take 12.", ["a 12-week window"], []),
        ("Between 10 and 12 days.", ["10 to 12 weeks"], ["10", "12 days"]),
        ("Disk alerts at 80%.", ["alerts at 80 percent"], []),
        ("Disk alerts at 80%.", ["alerts at 80 GB"], ["80%"]),
        ("Stored at -18°C for 1 year.", ["stored at −18 °C for up to one year"], []),
        # dates
        ("Signed on March 1, 2024 [2].", ["signed 2024-03-01"], []),
        ("Signed on 1 March 2024.", ["signed on March 2, 2024"], ["1 March 2024"]),
        ("Signed in 2024.", ["signed on 1 March 2024"], []),
        ("Signed in March 2024.", ["signed on 1 March 2024"], []),
        ("Signed on 1 March 2024.", ["signed in March 2024"], ["1 March 2024"]),
        # identifiers
        ("Use FIDO7 keys.", ["Use FIDO2 keys."], ["FIDO7"]),
        ("Use FIDO 2 keys.", ["Use FIDO2 keys."], []),
        ("Upgrade to v3.3.", ["Upgrade to v3.2."], ["v3.3"]),
        ("Upgrade to version 3.2.", ["Python 3.2 is out."], []),
        ("Encrypt with AES-128.", ["Encrypt with AES-256."], ["AES-128"]),
        ("Only TLS 1.3.", ["Only TLS 1.2."], ["TLS 1.3"]),
        ("Only TLSv1.3.", ["Only TLS 1.3."], []),
        ("SHA-256 hashes.", ["SHA-1 hashes."], ["SHA-256"]),
        ("ISO 27001 certified.", ["ISO 27002 certified."], ["ISO 27001"]),
        ("Page on SEV1.", ["A SEV 1 pages."], []),
        ("P0 incidents.", ["P1 incidents."], ["P0"]),
        ("Titanium dioxide (TiO2).", ["titanium dioxide (TiO 2 ; titania)"], []),
        ("COVID-19 spread; H2O boils.", ["nothing numeric here"], ["COVID-19", "H2O"]),
        # normalisation that must not flag
        ("The laptop costs $1,499 [3].", ["Price: 1499.0 USD"], []),
        ("The laptop costs $1,499 [3].", ["Price: 1,399 USD"], ["$1,499"]),
        ("Sales grew 12% in 2019 [1][2].", ["sales grew 12 % during 2019"], []),
        ("Sales grew 12% in 2019 [1].", ["sales grew 12 % during 2018"], ["2019"]),
        ("Four of 5 experts agree.", ["four in five experts"], []),
        ("It has 4 wheels.", ["It has four wheels."], []),
        ("It has 1.5 million users.", ["1,500,000 users"], []),
        ("It has 1,500,000 users.", ["1.5 million users"], []),
        ("It raised $2M.", ["it raised $2 million"], []),
        ("Between 2010-2015 prices doubled.", ["from 2010 to 2015"], []),
        ("Between 2010-2015 prices doubled.", ["from 2010 to 2014"], ["2015"]),
        ("Trains leave at 10:00 UTC.", ["Trains leave at 10:00 UTC."], []),
        ("Version 3.10.2, not 3.10.", ["3.10.2 is current"], ["3.10"]),
        ("It was 42, then 42.0 again.", ["nothing"], ["42"]),
        ("Founded in 1998.", ["It was founded in the late nineties."], ["1998"]),
        # markers and numbering
        ("Keys rotate yearly [pol-keys-1] [Data: Reports (7, 9)] [1, 2].", ["Keys rotate yearly."], []),
        ("1. Rotate keys every 90 days.", ["Rotate keys every 90 days."], []),
        ("Rotate every 90 days.", [], ["90 days"]),
        ("No numbers at all.", ["12 34"], []),
    ],
)
def test_hallucinated(segment, cited, expected):
    assert hallucinated(segment, cited) == expected


@given(st.integers(min_value=0, max_value=10**12))
def test_written_forms_of_one_integer_agree(n):
    forms = [f"{n}", f"{n:,}", f"${n:,}", f"{n}.0", f"{n:,}.00"]
    assert {m.key for f in forms for m in mentions(f"It was {f} in total.")} == {str(n)}
    assert {m.key for f in (f"{n}%", f"{n} %", f"{n} percent") for m in mentions(f)} == {f"{n} percent"}
    assert hallucinated(f"It was ${n:,} [2].", [f"The figure: {n}.0 in total"]) == []


# ---------------------------------------------------------------- a text never contradicts itself

_PIECES = st.sampled_from(
    [
        "12",
        "12%",
        "12 days",
        "twelve",
        "12-day",
        "$1,499",
        "1.5 million",
        "3.10.2",
        ".5",
        "2024-03-01",
        "March",
        "1",
        "2024",
        "May",
        "FIDO2",
        "AES-256",
        "TLS",
        "1.3",
        "v3.2",
        "SEV1",
        "P0",
        "COVID-19",
        "5G",
        "4K",
        "$5m",
        "ISO",
        "to",
        "and",
        "or",
        "between",
        ",",
        "-",
        ".",
        "[3]",
        "[pol-keys-1]",
        "\n1.",
        "10:00",
        "pm",
        "°C",
        "GB",
        "mg",
        "weeks",
        "per cent",
        "of",
        "the",
        "in",
        "x",
        "s",
        "th",
    ]
)
_TEXTS = st.one_of(
    st.lists(_PIECES, max_size=12).flatmap(
        lambda parts: st.lists(
            st.sampled_from(["", " ", "  ", "-", "\n"]), min_size=len(parts), max_size=len(parts)
        ).map(lambda seps: "".join(p + s for p, s in zip(parts, seps)))
    ),
    st.text(max_size=80),
)


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_any_text_is_never_flagged_against_itself(text):
    assert hallucinated(text, [text]) == []


@settings(max_examples=200, deadline=None)
@given(_TEXTS)
def test_mentions_are_ordered_disjoint_slices(text):
    found = mentions(text)
    assert all(text[m.start : m.end] == m.surface and m.kind in ("number", "date", "identifier") for m in found)
    assert all(a.end <= b.start for a, b in zip(found, found[1:]))


# ---------------------------------------------------------------- the handbook demo


def _handbook() -> list[dict]:
    lines = (ROOT / "gold_sets" / "handbook" / "gold.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_every_handbook_anchor_is_covered_by_itself():
    anchors = [item["anchor"]["text"] for item in _handbook()]
    assert len(anchors) >= 80
    assert {a: hallucinated(a, [a]) for a in anchors if hallucinated(a, [a])} == {}


def test_handbook_reference_answers_are_covered_by_their_anchor():
    items = _handbook()
    assert {
        i["qid"]: hallucinated(i["reference_answer"], [i["anchor"]["text"]])
        for i in items
        if hallucinated(i["reference_answer"], [i["anchor"]["text"]])
    } == {}


def test_handbook_wrong_quantities_are_flagged_against_the_anchor():
    wrong = [
        (w, i["anchor"]["text"])
        for i in _handbook()
        for w in i.get("answers_not_allowed", [])
        if any(c.isdigit() for c in w)
    ]
    assert len(wrong) >= 10
    assert [w for w, anchor in wrong if not hallucinated(w, [anchor])] == []


# ---------------------------------------------------------------- real answers (ExpertQA)


@pytest.mark.shared
def test_few_expertqa_claims_judged_complete_are_flagged():
    header = re.compile(r"^\[\d+\][ \t]+\S*[ \t]*(?:\n|$)")
    flagged = {"Complete": [], "Partial/Incomplete": []}
    for line in shared_path("expertqa", "rand_val.jsonl").read_text(encoding="utf-8").splitlines():
        for answer in json.loads(line)["answers"].values():
            for claim in answer["claims"]:
                label = {
                    "Complete": "Complete",
                    "Partial": "Partial/Incomplete",
                    "Incomplete": "Partial/Incomplete",
                }.get(claim.get("support"))
                passages = [p for p in (header.sub("", e, count=1).strip() for e in claim["evidence"]) if p]
                if label and passages:
                    flagged[label].append(bool(hallucinated(claim["claim_string"], passages)))
    assert len(flagged["Complete"]) == 534
    complete, other = (sum(v) / len(v) for v in flagged.values())
    # measured: 6.4% of Complete claims and 15.9% of the others (5.1% and 7.7% before acronyms
    # and numbers written as words with their unit were read in answers: AMD, FPGA, JFK are
    # knowledge the quoted passage lacks)
    assert complete <= 0.07 and other >= 2 * complete


def test_a_number_in_three_or_more_groups_is_one_identifier():
    assert [(m.surface, m.kind) for m in mentions("call 9-1-1 or 1-800-555-0100")] == [
        ("9-1-1", "identifier"),
        ("1-800-555-0100", "identifier"),
    ]
    assert hallucinated("Call 1-1-1 at once.", ["Immediately call 9-1-1."]) == ["1-1-1"]
    assert hallucinated("Wait 10-12 days.", ["It takes 10-12 days."]) == []  # a range stays two numbers


def test_reading_a_text_of_many_ranges_grows_linearly_with_its_length(monkeypatch):
    """Each range "between 10 and 12 days" once looked back for its "between" from the text's start:
    a text of n ranges was read about n²/2 times over."""
    import ragaudit.checks.metrics.quantities as quantities

    reads = RegexReads(monkeypatch, quantities)
    sentence = "Keys rotate between 10 and 12 days on 2024-03-01 for TLS 1.3 at $1,499. "

    def read(copies: int) -> int:
        before = reads.chars
        found = quantities._scan(sentence * copies, words=True)
        assert [m.key for m in found[:2]] == ["10 day", "12 day"]  # the range still shares its unit
        assert len(found) == 5 * copies
        return reads.chars - before

    small, large = read(200), read(400)
    assert large <= 2.1 * small
    assert small <= 40 * len(sentence * 200)  # a bounded number of reads per character


@pytest.mark.parametrize(
    "before",
    ["between ", "Between\t", "between\n  ", "x between ", "inbetween ", "between", "betweens ", " ", "", "(between  "],
)
def test_between_is_read_just_before_a_range_as_searched_from_the_start(before):
    import ragaudit.checks.metrics.quantities as quantities

    text = "Kept " + before + "10"
    at = text.index("10")
    assert quantities._after_between(text, at) == bool(quantities._BETWEEN.search(text, 0, at))


@pytest.mark.parametrize(
    "claim, cited, missing",
    [
        (
            "Seventeen seconds per incident page [1].",
            ["A SEV1 page must be acknowledged within 5 minutes."],
            ["Seventeen seconds"],
        ),
        ("Keys rotate every two weeks.", ["Keys rotate every 14 days."], []),
        ("Keys rotate every 1 year.", ["Keys rotate every 12 months."], []),
        ("Keys rotate every two months.", ["Keys rotate every 60 days."], ["two months"]),  # months are no days
        ("Twelve hosts, a dozen in all.", ["It runs on 12 hosts."], []),
        ("Patch on the fifth business day.", ["Patches ship within 7 business days."], ["fifth business day"]),
        ("One of them is kept.", ["Two copies are kept."], []),  # a number word without a unit: a turn of phrase
    ],
)
def test_numbers_written_as_words_and_durations_are_quantities(claim, cited, missing):
    assert hallucinated(claim, cited) == missing


@pytest.mark.parametrize(
    "claim, cited, missing",
    [
        ("Keys rotate annually.", ["Keys are rotated every 12 months."], []),
        ("Keys rotate yearly.", ["Keys are rotated once a year."], []),
        ("Access is reviewed quarterly.", ["Managers review access every three months."], []),
        ("Reviews run every quarter.", ["Quarterly access reviews."], []),
        ("Backups run daily.", ["A backup is taken each day."], []),
        ("Managers perform annual access reviews.", ["Managers review access every quarter."], ["annual"]),
        ("Reports go out weekly.", ["Reports go out every month."], ["weekly"]),
        ("A semi-annual audit.", ["An audit."], []),  # no period of its own
        ("A quarter of the hosts.", ["Some hosts."], []),  # a share, not a period
        # a cited text's "an hour", "a day" cover a period; an answer's are not required of its sources
        ("The API allows 500 requests per hour.", ["The API allows 500 requests an hour."], []),
        ("Staff work 8 hours daily.", ["Staff work 8 hours a day."], []),
        ("Staff work 8 hours a day.", ["Staff work 8 hours on each shift."], []),
        ("Reports go out weekly.", ["Reports go out a month after the audit."], ["weekly"]),
    ],
)
def test_how_often_in_words_is_a_period(claim, cited, missing):
    assert hallucinated(claim, cited) == missing


@pytest.mark.parametrize(
    "claim, cited, missing",
    [
        (
            "The Security Engineering Board (SEB) approves exceptions [1].",
            ["Security Engineering approves exceptions."],
            ["SEB"],
        ),
        ("Exceptions go to the SEB [1].", ["Security Engineering approves exceptions."], ["SEB"]),
        ("Use multi-factor authentication (MFA) [1].", ["Use multi-factor authentication for every login."], []),
        ("The CISO approves it.", ["The Chief Information Security Officer approves exceptions."], []),
        ("Rotate the APIs keys.", ["Rotate API keys."], []),
        ("Measure the cardiothoracic ratio (CTR).", ["Measure the cardiothoracic ratio."], []),  # a name of its own
        ("The IT team reviews it.", ["The Platform Security team reviews it."], []),  # two capitals: a word
        ("SEV II incidents page.", ["SEV incidents page."], []),  # a roman numeral
        ("PLEASE ROTATE THE KEYS NOW.", ["Rotate the keys."], []),  # written in capitals
    ],
)
def test_an_acronym_its_cited_texts_do_not_write_is_hallucinated(claim, cited, missing):
    assert hallucinated(claim, cited) == missing
