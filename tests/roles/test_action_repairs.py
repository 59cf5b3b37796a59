"""Actions: validated outputs, repairs with feedback, LLM settings, custom runs."""

from __future__ import annotations

import json

import pytest
import trio
from pydantic import BaseModel

from sopbus.bus import ChatMessage, ConfigError, LLMRequest, Message, ModelOutputError
from sopbus.roles import Action, ActionContext, ActionResult, LLMSettings, Registry, Role
from support.scripted_gateway import ScriptedGateway, turn

REG = Registry()


class Review(BaseModel):
    approved: bool
    problems: list[str]


class WriteCode(Action, registry=REG):
    instruction = "Write the code."


class ReviewCode(Action, registry=REG):
    instruction = "Review the code in the messages as $role. List concrete problems."
    Output = Review


class Summarize(Action, registry=REG):
    instruction = "Summarize."


class Reviewer(Role, registry=REG):
    profile = "Code Reviewer"
    goal = "Find bugs before users do"
    watch = (WriteCode,)
    actions = (ReviewCode,)


CODE = Message(
    cause_by="WriteCode", sent_from="Alex", content="def add(a, b): return a - b", id="m1", round=1
)
GOOD = '{"approved": false, "problems": ["add subtracts"]}'


def rita(**fields: object) -> Reviewer:
    return Reviewer(
        name="Rita",
        llm_defaults=LLMSettings(model="test-model"),
        registry=REG,
        **fields,  # type: ignore[arg-type]
    )


async def test_invalid_json_then_schema_violation_then_valid_succeeds_after_two_repairs() -> None:
    gw = ScriptedGateway(["{not json", '{"approved": "maybe", "problems": []}', GOOD])
    out = await rita().step([CODE], turn(gw, role="Rita", round=4))

    assert [c.attempt for c in gw.calls] == [1, 2, 3]
    assert [c.round for c in gw.calls] == [4, 4, 4]
    assert {(c.request.action, c.request.role) for c in gw.calls} == {("ReviewCode", "Rita")}
    first, second, third = (c.request for c in gw.calls)
    assert first.schema == Review.model_json_schema() and first.schema_name == "ReviewCode"
    # Each repair resends the original prompt plus the bad answer and what was wrong with it.
    assert second.messages[:2] == first.messages == third.messages[:2]
    assert second.messages[2] == ChatMessage("assistant", "{not json")
    assert "not valid JSON" in second.messages[3].content
    assert third.messages[2] == ChatMessage("assistant", '{"approved": "maybe", "problems": []}')
    assert "at `approved`" in third.messages[3].content and "'maybe'" in third.messages[3].content

    assert len(out) == 1
    assert out[0].payload == {"approved": False, "problems": ["add subtracts"]}
    assert out[0].content == "## Approved\nno\n\n## Problems\n- add subtracts"
    assert (out[0].cause_by, out[0].sent_from, out[0].parents) == ("ReviewCode", "Rita", ("m1",))


async def test_repairs_exhausted_raise_model_output_error_naming_action_role_and_error() -> None:
    gw = ScriptedGateway(["{not json", '{"approved": true}'])
    role = rita(actions=[ReviewCode(max_repairs=1)])
    with pytest.raises(ModelOutputError) as info:
        await role.step([CODE], turn(gw, role="Rita"))
    text = str(info.value)
    assert "'ReviewCode'" in text and "'Rita'" in text
    assert "at `problems`: Field required" in text
    assert "max_repairs=1" in text
    assert [c.attempt for c in gw.calls] == [1, 2]


async def test_zero_repairs_means_one_ask() -> None:
    gw = ScriptedGateway(['{"approved": 1.5, "problems": []}'])
    with pytest.raises(ModelOutputError, match="at `approved`"):
        await rita(actions=[ReviewCode(max_repairs=0)]).step([CODE], turn(gw))
    assert len(gw.calls) == 1


async def test_fenced_json_is_accepted_without_a_repair() -> None:
    gw = ScriptedGateway([f"```json\n{GOOD}\n```"])
    out = await rita().step([CODE], turn(gw))
    assert len(gw.calls) == 1 and out[0].payload["problems"] == ["add subtracts"]


async def test_prompt_tells_role_task_and_context() -> None:
    gw = ScriptedGateway([GOOD])
    await rita().step([CODE], turn(gw))
    system, user = gw.calls[0].request.messages
    assert system == ChatMessage(
        "system", "You are Rita, Code Reviewer.\nYour goal: Find bugs before users do"
    )
    assert user.role == "user"
    assert user.content == (
        "## Context\n### WriteCode from Alex\ndef add(a, b): return a - b\n\n"
        "## Your task: ReviewCode\n"
        "Review the code in the messages as Rita. List concrete problems."
    )


async def test_prompt_output_mode_writes_the_schema_into_the_prompt() -> None:
    gw = ScriptedGateway([GOOD])
    await rita(llm=LLMSettings(output_mode="prompt")).step([CODE], turn(gw))
    request = gw.calls[0].request
    assert request.output_mode == "prompt"
    last = request.messages[-1].content
    schema_json = last.split("fits this JSON schema:\n", 1)[1]
    assert json.loads(schema_json) == Review.model_json_schema()


async def test_free_text_action_publishes_the_text_as_is() -> None:
    class Notes(Role, register=False):
        watch = ("WriteCode",)
        actions = ("Summarize",)

    gw = ScriptedGateway(["It adds, badly."])
    out = await Notes(llm_defaults=LLMSettings(model="m"), registry=REG).step([CODE], turn(gw))
    assert gw.calls[0].request.schema is None and gw.calls[0].request.schema_name is None
    assert (out[0].content, out[0].payload, out[0].cause_by) == (
        "It adds, badly.",
        None,
        "Summarize",
    )


async def test_no_model_anywhere_is_a_config_error_before_any_call() -> None:
    gw = ScriptedGateway([GOOD])
    with pytest.raises(ConfigError, match=r"no model for action 'ReviewCode' of role 'Rita'"):
        await Reviewer(name="Rita", registry=REG).step([CODE], turn(gw))
    assert gw.calls == []


async def test_llm_settings_layer_run_defaults_then_action_then_role() -> None:
    class Careful(ReviewCode, register=False):
        llm = LLMSettings(temperature=0.0, max_tokens=300, model="action-model")

    defaults = LLMSettings(model="run-model", temperature=0.7, max_tokens=1000)
    gw = ScriptedGateway([GOOD, GOOD])
    role = Reviewer(
        actions=[Careful], llm_defaults=defaults, llm=LLMSettings(max_tokens=500), registry=REG
    )
    await role.step([CODE], turn(gw))
    req = gw.calls[0].request
    assert (req.model, req.temperature, req.max_tokens) == ("action-model", 0.0, 500)

    await Reviewer(llm_defaults=defaults, registry=REG).step([CODE], turn(gw))
    req = gw.calls[1].request
    assert (req.model, req.temperature, req.max_tokens) == ("run-model", 0.7, 1000)


def test_llm_settings_over_keeps_unset_fields_of_the_base() -> None:
    base = LLMSettings(model="a", temperature=0.5)
    assert LLMSettings(temperature=0.0).over(base) == LLMSettings(model="a", temperature=0.0)
    with pytest.raises(ValueError):
        LLMSettings(temperature=3.0)


class CountLines(Action, register=False):
    """Counts the lines of the code it is given: no model involved."""

    async def run(self, ctx: ActionContext) -> ActionResult:
        lines = sum(m.content.count("\n") + 1 for m in ctx.news)
        return ActionResult(content=f"{lines} lines", payload={"lines": lines}, send_to=("Alex",))


async def test_a_custom_run_needs_no_model_and_may_address_someone() -> None:
    class Counter(Role, register=False):
        watch = (WriteCode,)
        actions = (CountLines,)

    code = Message(cause_by="WriteCode", sent_from="Alex", content="a\nb\nc", id="m9")
    gw = ScriptedGateway([])
    out = await Counter(registry=REG).step([code], turn(gw))
    assert gw.calls == []
    assert (out[0].content, out[0].payload, out[0].send_to) == ("3 lines", {"lines": 3}, ("Alex",))
    assert out[0].cause_by == "CountLines" and out[0].parents == ("m9",)


class FileReview(BaseModel):
    file: str
    ok: bool


class ReviewFiles(Action, register=False):
    """Reviews each file of the news in its own call, all calls at once."""

    async def run(self, ctx: ActionContext) -> ActionResult:
        files = [m.content for m in ctx.news]
        results: dict[str, bool] = {}

        async def one(name: str) -> None:
            prompt = (ChatMessage("user", f"Review {name}"),)
            results[name] = (await self.ask(ctx, prompt, output=FileReview)).ok

        async with trio.open_nursery() as nursery:
            for name in files:
                nursery.start_soon(one, name)
        return ActionResult(content="reviewed", payload={k: results[k] for k in sorted(results)})


async def test_several_concurrent_asks_in_one_action() -> None:
    def answer(request: LLMRequest, attempt: int) -> str:
        name = request.messages[0].content.removeprefix("Review ")
        return json.dumps({"file": name, "ok": name != "b.py"})

    class Multi(Role, register=False):
        watch = (WriteCode,)
        actions = (ReviewFiles,)

    news = [Message(cause_by="WriteCode", sent_from="A", content=f, id=f) for f in ("a.py", "b.py")]
    gw = ScriptedGateway(answer)
    out = await Multi(llm_defaults=LLMSettings(model="m"), registry=REG).step(news, turn(gw))
    assert out[0].payload == {"a.py": True, "b.py": False}
    assert sorted(c.request.messages[0].content for c in gw.calls) == ["Review a.py", "Review b.py"]
    assert {c.request.action for c in gw.calls} == {"ReviewFiles"}


async def test_a_huge_bad_answer_is_quoted_back_only_by_its_head() -> None:
    from sopbus.roles._llm import REPAIR_QUOTE_CHARS

    huge = "<html>" + "x" * 4_000_000  # what a broken server may send as "the answer"
    gw = ScriptedGateway([huge, GOOD])
    await rita().step([CODE], turn(gw, role="Rita", round=1))

    repair = gw.calls[1].request.messages
    quoted = repair[-2]
    assert quoted.role == "assistant" and quoted.content.startswith("<html>xxx")
    assert len(quoted.content) < REPAIR_QUOTE_CHARS + 100
    assert f"{len(huge) - REPAIR_QUOTE_CHARS} more characters" in quoted.content
    assert (
        sum(len(m.content) for m in repair)
        < sum(len(m.content) for m in gw.calls[0].request.messages) + REPAIR_QUOTE_CHARS + 1000
    )
