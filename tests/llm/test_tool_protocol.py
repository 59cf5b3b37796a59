"""Tools in the LLM protocol: encodings and keys that stay as they were without tools, the
openai provider's tools and tool calls against a real HTTP server, the prompt bound."""

from __future__ import annotations

from decimal import Decimal

import msgspec
import pytest

from sopbus.bus import Budget, ChatMessage, Gateway, LLMRequest, OpenAIProvider, PriceBook
from sopbus.bus._protocol import Completion, ToolCall, ToolSpec
from sopbus.bus.llm import prompt_upper_bound, request_key
from sopbus.bus.llm._request import request_params, wire_names
from sopbus.bus.llm._sim import _seed_text
from support.openai_server import Answer, OpenAIServer

PRICES = PriceBook.load()
GIT_LOG = ToolSpec(
    name="git.git_log",
    description="The commit log.",
    parameters={"type": "object", "properties": {"max_count": {"type": "integer"}}},
)
NOW = ToolSpec(name="time.get_current_time", description="The time in a zone.")


def plain() -> LLMRequest:
    return LLMRequest(
        messages=(ChatMessage("system", "a"), ChatMessage("user", "b")), model="gpt-4o-mini"
    )


def test_a_request_without_tools_keys_and_encodes_as_before_tools() -> None:
    # Figures taken from the code before tools existed: every recording keeps matching.
    request = msgspec.structs.replace(plain(), model="m")
    assert request_key(request) == (
        "510646f77c81787e64dc1889f8c8c01c404ac1cd810e0314a8e66a2b30cbfb3c"
    )
    sampled = msgspec.structs.replace(request, extra_body={"top_k": 3})
    assert request_key(sampled) == (
        "6e82bd90112c983bbe6e056a4d25c52b845f6be999c981a4bb18a6b7c4ad730d"
    )
    assert msgspec.json.encode(ChatMessage("user", "b")) == b'{"role":"user","content":"b"}'
    assert b"tools" not in _seed_text(request)
    # Fields added after the seed was fixed (tools when none, idle_timeout_s, tool_choice
    # when unset) are left out.
    encoded = msgspec.json.encode(request)
    added = b',"tools":[],"idle_timeout_s":null,"tool_choice":null'
    assert _seed_text(request) == encoded.replace(added, b"")


def test_tool_choice_is_sent_and_keyed_only_when_set() -> None:
    offered = msgspec.structs.replace(plain(), tools=(GIT_LOG,))
    required = msgspec.structs.replace(offered, tool_choice="required")
    assert "tool_choice" not in request_params(offered)
    assert request_params(required)["tool_choice"] == "required"
    keys = {request_key(offered), request_key(required)}
    keys.add(request_key(msgspec.structs.replace(offered, tool_choice="none")))
    assert len(keys) == 3
    assert b"tool_choice" not in _seed_text(offered)
    assert b'"tool_choice":"required"' in _seed_text(required)


def test_tools_and_tool_messages_change_the_key() -> None:
    request = plain()
    offered = msgspec.structs.replace(request, tools=(GIT_LOG,))
    call = ToolCall(id="c1", name="git.git_log", arguments='{"max_count": 5}')
    grown = msgspec.structs.replace(
        offered,
        messages=(
            *offered.messages,
            ChatMessage("assistant", "", tool_calls=(call,)),
            ChatMessage("tool", "3 commits", tool_call_id="c1"),
        ),
    )
    keys = {request_key(r) for r in (request, offered, grown)}
    assert len(keys) == 3


def test_the_prompt_bound_grows_with_tools_and_tool_messages() -> None:
    request = plain()
    offered = msgspec.structs.replace(request, tools=(GIT_LOG, NOW))
    call = ToolCall(id="c1", name="git.git_log", arguments='{"max_count": 5}')
    grown = msgspec.structs.replace(
        offered,
        messages=(
            *offered.messages,
            ChatMessage("assistant", "", tool_calls=(call,)),
            ChatMessage("tool", "x " * 300, tool_call_id="c1"),
        ),
    )
    bounds = [prompt_upper_bound(r) for r in (request, offered, grown)]
    assert bounds[0] < bounds[1] < bounds[2]
    assert bounds[2] - bounds[1] >= 300  # the result's text is counted
    unknown = msgspec.structs.replace(grown, model="my-local-model")
    assert prompt_upper_bound(unknown) >= len(b"x " * 300)


def test_wire_names_fit_the_api_and_map_back() -> None:
    odd = ToolSpec(name="srv.get.the-thing!")
    request = msgspec.structs.replace(plain(), tools=(GIT_LOG, odd, NOW))
    names = wire_names(request)
    assert names == ["git__git_log", "srv__get_the-thing_", "time__get_current_time"]
    params = request_params(request)
    assert [t["function"]["name"] for t in params["tools"]] == names
    assert params["tools"][0]["function"]["parameters"] == GIT_LOG.parameters


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_sends_tools_and_reads_tool_calls(
    openai_server: OpenAIServer, stream: bool
) -> None:
    openai_server.script(
        Answer(
            "",
            tool_calls=(
                ("call_a", "git__git_log", '{"max_count": 5}'),
                ("call_b", "nope__nothing", "{}"),
            ),
        ),
        Answer("Two commits changed parser.py."),
    )
    call = ToolCall(id="call_a", name="git.git_log", arguments='{"max_count": 5}')
    request = msgspec.structs.replace(plain(), tools=(GIT_LOG,))
    async with OpenAIProvider(
        base_url=openai_server.base_url, api_key="sk-test", stream=stream
    ) as provider:
        gateway = Gateway(provider, PRICES, Budget(Decimal("1")))
        first: Completion = await gateway.complete(request, round=1)
        follow = msgspec.structs.replace(
            request,
            messages=(
                *request.messages,
                ChatMessage("assistant", "", tool_calls=(call,)),
                ChatMessage("tool", "2 commits", tool_call_id="call_a"),
            ),
        )
        second = await gateway.complete(follow, round=1)
    assert first.tool_calls == (
        call,
        ToolCall(id="call_b", name="nope__nothing", arguments="{}"),  # not offered: kept
    )
    assert first.finish_reason == "tool_calls"
    assert second.text == "Two commits changed parser.py." and second.tool_calls == ()
    sent = openai_server.requests[0].body
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "git__git_log",
                "description": "The commit log.",
                "parameters": GIT_LOG.parameters,
            },
        }
    ]
    again = openai_server.requests[1].body["messages"]
    assert again[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "git__git_log", "arguments": '{"max_count": 5}'},
            }
        ],
    }
    assert again[3] == {"role": "tool", "content": "2 commits", "tool_call_id": "call_a"}
