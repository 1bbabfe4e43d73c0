from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_guard import MARKER_KEY, enforce_provider_hygiene
from tests.engine._support import ai, call, result


def test_user_first_history_is_returned_as_is():
    history = [SystemMessage("s"), HumanMessage("q"), AIMessage("a")]
    assert enforce_provider_hygiene(history) is history


def test_assistant_first_gets_a_marked_user_placeholder_after_system():
    history = [SystemMessage("s"), ai(call("a")), result("a"), AIMessage("done")]
    out = enforce_provider_hygiene(history)
    assert isinstance(out[1], HumanMessage)
    assert out[1].additional_kwargs[MARKER_KEY] == {"kind": "placeholder"}
    assert out[0] is history[0] and out[2:] == history[1:]
    assert enforce_provider_hygiene(out) is out


def test_empty_tool_result_gets_placeholder_text_and_empty_messages_go():
    history = [HumanMessage("q"), AIMessage(""), ai(call("a")), result("a", "")]
    out = enforce_provider_hygiene(history)
    assert len(out) == 3
    assert out[2].content == "(no output)"
    assert out[2].additional_kwargs[MARKER_KEY]["kind"] == "placeholder"


def test_only_system_messages_need_nothing():
    history = [SystemMessage("s")]
    assert enforce_provider_hygiene(history) is history
