"""A name a claim changes (docs/reference.md §3, *changes a name*)."""

import pytest

from ragaudit.checks.metrics.swaps import Swap, swaps

TEXT = "In 1066, Duke William II of Normandy conquered England killing King Harold II at the Battle of Hastings."


def test_a_changed_title_of_a_name_is_a_swap():
    assert swaps("The Duke of Normandy was King William II of Normandy.", [TEXT]) == (
        Swap("King William II of Normandy", "Duke William II of Normandy"),
    )


def test_a_changed_word_before_an_of_is_a_swap_but_not_the_head():
    text = "Emma was the sister of the Duke of Normandy."
    assert swaps("Emma was the sister of the Duke of Aquitaine.", [text]) == (
        Swap("Duke of Aquitaine", "Duke of Normandy"),
    )
    assert swaps("Emma was the sister of the Count of Normandy.", [text]) == ()  # its head: another kind


@pytest.mark.parametrize(
    "claim",
    [
        "Duke William II of Normandy won at the Battle of Hastings.",  # written as the text writes it
        "William II of Normandy won at Hastings.",  # part of the name
        "The Norman duke William conquered England.",  # no name of two capitalised words it changes
        "He was charged under New York Penal Law.",  # another head: not this rule's
        "It speaks UART, SPI and I2C.",  # a list, not a name
        "Output: Perform the checks.",  # a clause's first word is capitalised by its place
    ],
)
def test_what_is_no_swap(claim):
    texts = [TEXT, "He was charged under New York Penal Code 120.", "Interface SPI, and then the Static checks."]
    assert swaps(claim, texts) == ()


def test_the_question_writes_names_too():
    assert swaps("He was King William II of Normandy.", [TEXT]) != ()
    assert swaps("He was King William II of Normandy.", [TEXT, "Was it King William II of Normandy?"]) == ()


def test_a_name_opening_the_sentence_is_capitalised_by_its_place():
    assert swaps("King William II of Normandy won.", [TEXT]) == ()  # "King" may be any word there


def test_a_word_opening_the_text_s_sentence_is_no_name_to_change():
    assert swaps("He was King William II of Normandy.", ["Duke William II of Normandy won."]) == ()
    assert (
        swaps(
            "He was King William II of Normandy.",
            ["Duke William II of Normandy won. So said Duke William II of Normandy."],
        )
        != ()
    )
