"""An answer rewritten the way an LLM writes it: the same fact in other words. The negative control
of fault injection (`llm_rewrite`) and of `ragaudit calibrate`: a gate that fails these fails a
correct pipeline whose answerer is an LLM.

Each statement is rewritten with a seeded mix of what LLMs do to a source sentence: an opener
("According to the documentation, …", or a sentence of its own that asserts nothing), synonyms
(`must` → `is required to`, `within` → `no later than`), a leading clause moved to the end, a
neighbouring sentence of the cited text merged in (as a clause or a sentence of its own), and a
hedge ("Generally, …", "…, per the documentation"). Quantities, dates, identifiers and names are
never touched, nor is a negation: the rewrite states exactly what the source states.
"""

from __future__ import annotations

import random
import re

from ragaudit.core.text import names, sentences

OPENERS = (
    "According to the documentation, {s}",
    "Based on the provided context, {s}",
    "The source states that {s}",
    "In short, {s}",
    "As the documentation explains, {s}",
)
STANDALONE = (
    "Here is what the documentation says.",
    "Based on the provided context, here is the answer.",
    "Sure.",
    "According to the sources:",
)
HEDGES = (
    "Generally, {s}",
    "In general, {s}",
    "{s0}, per the documentation{p}",
    "{s0}, according to the source{p}",
)
# word -> replacements that keep the meaning (whole words, any case); no negations, no antonyms
SYNONYMS = {
    "must": ("will have to", "will need to"),
    "should": ("ought to",),
    "may": ("can",),
    "within": ("no later than", "in no more than"),
    "at least": ("no fewer than", "a minimum of"),
    "at most": ("no more than", "a maximum of"),
    "mandatory": ("required", "compulsory"),
    "required": ("mandatory", "needed"),
    "allowed": ("permitted",),
    "permitted": ("allowed",),
    "prohibited": ("forbidden", "banned"),
    "forbidden": ("prohibited",),
    "automatically": ("on its own", "without manual action"),
    "immediately": ("right away", "at once"),
    "approximately": ("about", "roughly"),
    "about": ("around",),
    "around": ("about",),
    "large": ("big",),
    "big": ("large",),
    "small": ("little",),
    "begin": ("start",),
    "begins": ("starts",),
    "start": ("begin",),
    "starts": ("begins",),
    "stored": ("kept",),
    "retained": ("kept", "held"),
    "kept": ("retained",),
    "deleted": ("removed", "erased"),
    "removed": ("deleted",),
    "use": ("utilize",),
    "uses": ("utilizes",),
    "used": ("utilized",),
    "receive": ("get",),
    "receives": ("gets",),
    "obtain": ("get",),
    "before": ("prior to",),
    "after": ("following",),
    "during": ("throughout",),
    "because": ("since",),
    "often": ("frequently",),
    "usually": ("typically",),
    "main": ("primary", "principal"),
    "primary": ("main",),
    "important": ("significant", "key"),
    "many": ("numerous", "a lot of"),
    "several": ("a number of",),
    "people": ("individuals",),
    "employees": ("staff members", "workers"),
    "staff": ("employees", "personnel"),
    "company": ("organization", "firm"),
    "built": ("constructed",),
    "made": ("created",),
    "create": ("make",),
    "created": ("made",),
    "called": ("known as", "named"),
    "famous": ("well-known", "renowned"),
    "show": ("demonstrate", "indicate"),
    "shows": ("demonstrates", "indicates"),
    "showed": ("demonstrated",),
    "also": ("additionally", "as well"),
    "however": ("but",),
    "quickly": ("rapidly", "fast"),
    "increase": ("rise",),
    "increases": ("rises",),
    "reduce": ("lower", "decrease"),
    "reduces": ("lowers", "decreases"),
    "end": ("finish",),
    "ends": ("finishes",),
    "need": ("require",),
    "needs": ("requires",),
    "get": ("receive",),
    "gets": ("receives",),
    "give": ("provide",),
    "gives": ("provides",),
    "gave": ("provided",),
    "find": ("locate",),
    "buy": ("purchase",),
    "child": ("kid",),
    "children": ("kids",),
    "problem": ("issue",),
    "problems": ("issues",),
    "issue": ("problem",),
    "issues": ("problems",),
    "method": ("approach", "technique"),
    "methods": ("approaches", "techniques"),
    "rule": ("policy",),
    "rules": ("policies",),
    "several times": ("repeatedly",),
    "also known as": ("otherwise called",),
    "located": ("situated", "found"),
    "known": ("recognized",),
    "region": ("area",),
    "area": ("region",),
    "whole": ("entire",),
    "entire": ("whole",),
    "only": ("solely", "exclusively"),
    "fast": ("quick",),
    "hard": ("difficult",),
    "difficult": ("hard",),
    "simple": ("straightforward",),
    "common": ("widespread", "frequent"),
    "commonly": ("frequently",),
    "typically": ("usually",),
    "approve": ("sign off on",),
    "approved": ("signed off",),
    "review": ("check",),
    "reviewed": ("checked", "examined"),
    "expire": ("lapse", "run out"),
    "expires": ("lapses", "runs out"),
    "notify": ("inform", "alert"),
    "notified": ("informed", "alerted"),
    "report": ("notify",),
    "reported": ("notified", "flagged"),
    "store": ("keep",),
    "stores": ("keeps",),
    "requires": ("needs",),
    "include": ("cover",),
    "includes": ("covers",),
    "included": ("covered",),
    "including": ("among them",),
}
_LEADING_CLAUSE = re.compile(
    r"^(?P<clause>(?:After|Before|During|Within|Once|When|If|Unless|For|In|On|At|By|Since|Until|Every|Each)\b[^,;]{3,80}),\s+(?P<rest>.+?)(?P<end>[.!?]?)$"
)
_NEGATED = re.compile(r"\W*(?:\w+\W+)?(?:not|no|never|none|nor|neither)\b|n't\b", re.IGNORECASE)


def _case_like(source: str, word: str) -> str:
    return word[:1].upper() + word[1:] if source[:1].isupper() else word


def synonyms(text: str, rng: random.Random, *, share: float = 0.6) -> str:
    """Replace a seeded `share` of the words that have a synonym; never a word a negation follows
    within a word ("must not" stays), nor a capitalised word inside the sentence (a name)."""
    keys = sorted(SYNONYMS, key=len, reverse=True)
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in keys) + r")\b", re.IGNORECASE)

    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        options = SYNONYMS.get(word.lower())
        named = word[:1].isupper() and m.start() > 0  # "Reliability Review" is a name, not a review
        if not options or named or _NEGATED.match(text, m.end()) or rng.random() >= share:
            return word
        return _case_like(word, rng.choice(options))

    return pattern.sub(swap, text)


def _lower_first(sentence: str, context: str = "") -> str:
    """The sentence with its first word in lower case, unless that word is a name (written with a
    capital inside the context) or an acronym."""
    first = sentence.split(" ", 1)[0]
    title = first[:1].isupper() and (len(first) == 1 or first[1:].islower())
    if title and first.isalpha() and first.lower() not in names(context):
        return sentence[:1].lower() + sentence[1:]
    return sentence


def move_clause(sentence: str) -> str:
    """ "After 6 failed attempts, an account is locked." → "An account is locked after 6 failed attempts."."""
    m = _LEADING_CLAUSE.match(sentence.strip())
    if not m:
        return sentence
    rest = m["rest"].rstrip(".!?")
    clause = m["clause"]
    return f"{rest[:1].upper()}{rest[1:]} {clause[:1].lower()}{clause[1:]}{m['end'] or '.'}"


def neighbour(statement: str, cited_text: str) -> str | None:
    """The sentence of the cited text after the one the statement came from (or before it)."""
    units = [u.strip() for u in sentences(cited_text) if not u.lstrip().startswith("#") and len(u.split()) >= 4]
    flat = " ".join(statement.split())
    for i, unit in enumerate(units):
        if " ".join(unit.split()) in flat or flat in " ".join(unit.split()):
            if i + 1 < len(units):
                return units[i + 1]
            if i > 0:
                return units[i - 1]
    return None


def rewrite(statement: str, rng: random.Random, *, cited_text: str = "", first: bool = True) -> list[str]:
    """The statement as an LLM might write it: one or more sentences, the first carrying the fact."""
    body = " ".join(statement.split())
    if rng.random() < 0.5:
        body = move_clause(body)
    body = synonyms(body, rng)
    if body and body[-1] not in ".!?":
        body += "."
    out = [body]
    extra = neighbour(statement, cited_text) if cited_text and rng.random() < 0.5 else None
    if extra:
        extra = synonyms(" ".join(extra.split()), rng)
        if rng.random() < 0.5:
            out[0] = f"{body.rstrip('.!?')}, and {_lower_first(extra, cited_text).rstrip('.!?')}."
        else:
            out.append(extra if extra[-1] in ".!?" else extra + ".")
    context = f"{cited_text}\n{statement}"
    style = rng.random()
    if first and style < 0.35:
        out[0] = rng.choice(OPENERS).format(s=_lower_first(out[0], context))
    elif first and style < 0.55:
        out.insert(0, rng.choice(STANDALONE))
    elif style < 0.8:
        hedge = rng.choice(HEDGES)
        s0 = out[0].rstrip(".!?")
        out[0] = hedge.format(s=_lower_first(out[0], context), s0=s0, p=".")
    return out
