"""ask_question's spec, prompt and answers: bad arguments get errors the model can act on, each
type reads taps and replies, limits hold, callback data stays within Telegram's 64 bytes."""

from __future__ import annotations

import pytest

from connectors.interactive import callback_data, numbered_text, parse_callback, parse_select, select_id
from gateway.interactions.approvals import arguments_key, summarize
from gateway.interactions.kinds import READINGS
from gateway.interactions.questions import (
    QuestionError,
    answer_from_options,
    answer_from_text,
    check_question,
    question_prompt,
)
from tools.arguments import ArgumentChecker
from tools.ask.question import TOOL


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"question": "  "}, "question is empty; send the question to ask"),
        (
            {"question": "Q", "type": "choice", "choices": ["a"]},
            "type choice needs choices: a list of 2 to 25 options",
        ),
        (
            {"question": "Q", "type": "choice", "choices": ["a", "a"]},
            "choices must be distinct and non-empty",
        ),
        (
            {"question": "Q", "choices": ["a", "b"]},
            "choices are only for type choice or multi_choice, not text",
        ),
        ({"question": "Q", "allow_custom": True}, "allow_custom is only for type choice or multi_choice"),
        ({"question": "Q", "type": "number", "min": 5, "max": 1}, "min is greater than max; send min <= max"),
    ],
)
def test_bad_arguments_say_what_to_send(args: dict, message: str) -> None:
    with pytest.raises(QuestionError) as refused:
        check_question(args)
    assert str(refused.value) == message


def test_the_schema_bounds_sizes() -> None:
    checker = ArgumentChecker(TOOL.mcp_name, TOOL.input_schema)
    assert checker.problem({"question": "x" * 1001}) is not None
    assert checker.problem({"question": "Q", "choices": ["c"] * 26}) is not None
    assert checker.problem({"question": "Q", "type": "essay"}) is not None
    assert checker.problem({"question": "Q", "timeout_seconds": 10**9}) is not None
    assert checker.problem({"question": "Q", "type": "choice", "choices": ["a", "b"]}) is None


def test_choice_taps_and_replies() -> None:
    spec = check_question(
        {"question": "Colour?", "type": "choice", "choices": ["red", "blue"], "allow_skip": True}
    )
    assert answer_from_options(spec, ("2",)) == {"action": "answer", "content": {"value": "blue"}}
    assert answer_from_options(spec, ("skip",)) == {"action": "skip"}
    assert answer_from_options(spec, ("9",)) is None
    assert answer_from_text(spec, "Red")[0] == {"action": "answer", "content": {"value": "red"}}
    assert answer_from_text(spec, "1")[0] == {"action": "answer", "content": {"value": "red"}}
    assert answer_from_text(spec, "green") == (None, "Please reply with the number of a choice, 1 to 2.")
    custom = check_question({"question": "C?", "type": "choice", "choices": ["a", "b"], "allow_custom": True})
    assert answer_from_text(custom, "green")[0] == {
        "action": "answer",
        "content": {"value": None, "custom_value": "green"},
    }


def test_multi_choice_number_text_and_confirm() -> None:
    multi = check_question({"question": "Which?", "type": "multi_choice", "choices": ["a", "b", "c"]})
    assert answer_from_text(multi, "1, 3")[0] == {"action": "answer", "content": {"value": ["a", "c"]}}
    number = check_question({"question": "How many?", "type": "number", "min": 1, "max": 10})
    assert answer_from_text(number, "7")[0] == {"action": "answer", "content": {"value": 7}}
    assert answer_from_text(number, "11") == (None, "Please reply with a number from 1 to 10.")
    assert answer_from_text(number, "nan")[0] is None
    text = check_question({"question": "Name?", "min_length": 3, "max_length": 5})
    assert answer_from_text(text, "ab") == (None, "Please reply with at least 3 characters.")
    assert answer_from_text(text, "x" * 5000)[0] is None
    confirm = check_question({"question": "Ok?", "type": "confirm"})
    assert answer_from_options(confirm, ("n",)) == {"action": "answer", "content": {"value": False}}
    assert answer_from_text(confirm, "maybe") == (None, "Please reply yes or no.")


def test_numbered_prompt_and_callback_ids() -> None:
    spec = check_question({"question": "Colour?", "type": "choice", "choices": ["red", "blue"]})
    prompt = question_prompt("AbCd1234", spec, None)
    assert numbered_text(prompt).splitlines()[:4] == ["❓ Colour?", "", "1. red", "2. blue"]
    data = callback_data(prompt.id, "2")
    assert len(data.encode()) <= 64
    tap = parse_callback(data)
    assert tap is not None and (tap.prompt_id, tap.values) == ("AbCd1234", ("2",))
    assert parse_callback("x" * 65) is None and parse_callback("other:thing") is None
    selected = parse_select(select_id("AbCd1234"), ["1", "2"])
    assert selected is not None and selected.values == ("1", "2")


def test_approval_replies_and_summary() -> None:
    reading = READINGS["approval"]
    assert reading.from_text({}, "deny: not on a Friday")[0] == {
        "decision": "deny",
        "reason": "not on a Friday",
    }
    assert reading.from_text({}, "Approve")[0] == {"decision": "approve"}
    assert reading.from_text({}, "always")[0] == {"decision": "always"}
    assert reading.from_text({}, "hmm")[0] is None
    text = summarize(
        "bash", {"command": "rm -rf /tmp/x " + "y" * 1000, "secret": "hunter2"}, "u1", ["hunter2"]
    )
    assert text.startswith("🔐 Approval needed: bash (asked by u1)\n• command: rm -rf /tmp/x")
    assert "hunter2" not in text and len(text) <= 1500
    assert (
        arguments_key({"a": 1, "b": 2}) == arguments_key({"b": 2, "a": 1}) != arguments_key({"a": 2, "b": 2})
    )
