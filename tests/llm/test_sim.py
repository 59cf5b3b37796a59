from __future__ import annotations

import datetime
import enum
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model

from sopbus.bus import ChatMessage, ConfigError, LLMRequest, SimProvider, load_fixtures
from sopbus.bus.llm._tokens import count_prompt, count_text


def ask(
    text: str = "Write a PRD for a terminal snake game with levels and high scores",
    schema: dict[str, Any] | None = None,
    max_tokens: int = 2000,
    action: str = "WritePRD",
    role: str = "Alice",
) -> LLMRequest:
    return LLMRequest(
        messages=(ChatMessage("system", "You are a product manager."), ChatMessage("user", text)),
        model="gpt-4o-mini",
        schema=schema,
        max_tokens=max_tokens,
        action=action,
        role=role,
    )


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Story(BaseModel):
    title: str
    priority: int = Field(ge=1, le=5)
    points: float = Field(gt=0, lt=13)
    done: bool
    tags: list[str] = Field(min_length=1, max_length=3)


class PRD(BaseModel):
    product_name: str
    goals: list[str]
    stories: list[Story]
    color: Color
    kind: Literal["game", "tool"]
    owner_email: str | None = None
    due: datetime.date
    created: datetime.datetime
    uid: uuid.UUID
    scores: dict[str, int]
    pair: tuple[int, str]
    tree: Node
    code: Annotated[str, Field(min_length=5, max_length=8)]


async def test_output_validates_and_uses_the_prompts_words() -> None:
    completion = await SimProvider(seed=1).complete(ask(schema=PRD.model_json_schema()))
    prd = PRD.model_validate_json(completion.text)
    prose = " ".join(prd.goals + [s.title for s in prd.stories]).lower()
    assert any(word in prose for word in ("snake", "levels", "terminal", "scores"))
    assert completion.usage.completion_tokens == count_text(completion.text, "gpt-4o-mini")
    assert completion.usage.prompt_tokens == count_prompt(ask(schema=PRD.model_json_schema()))
    assert (completion.model, completion.provider) == ("gpt-4o-mini", "sim")


async def test_same_seed_same_answer_other_seed_or_input_other_answer() -> None:
    schema = PRD.model_json_schema()
    a = await SimProvider(seed=7).complete(ask(schema=schema))
    b = await SimProvider(seed=7).complete(ask(schema=schema))
    c = await SimProvider(seed=8).complete(ask(schema=schema))
    d = await SimProvider(seed=7).complete(
        ask("Write a PRD for a recipe sharing website", schema=schema)
    )
    assert a == b and a.text != c.text and a.text != d.text
    assert "recipe" in d.text.lower()


async def test_free_text_is_a_paragraph_about_the_prompt() -> None:
    completion = await SimProvider().complete(
        ask("Review the caching layer for the billing service")
    )
    assert completion.text.count(".") >= 3 and completion.text[0].isupper()
    assert any(w in completion.text for w in ("caching", "billing", "layer", "service", "review"))


@pytest.mark.parametrize("max_tokens", [1, 5, 40, 120])
async def test_the_answer_never_passes_max_tokens(max_tokens: int) -> None:
    for schema in (None, PRD.model_json_schema()):
        completion = await SimProvider().complete(ask(schema=schema, max_tokens=max_tokens))
        assert 0 < completion.usage.completion_tokens <= max_tokens


async def test_latency_sleeps_on_trios_clock(autojump_clock: object) -> None:
    import trio

    start = trio.current_time()
    await SimProvider(latency_ms=250).complete(ask())
    assert trio.current_time() - start == pytest.approx(0.25)


# Random pydantic models -----------------------------------------------------------------

_leaf = st.sampled_from(
    [
        str,
        int,
        float,
        bool,
        Literal["a", "b", "c"],
        Color,
        datetime.date,
        uuid.UUID,
        Annotated[int, Field(ge=-5, le=5)],
        Annotated[float, Field(gt=0.5, le=0.75)],
        Annotated[str, Field(min_length=3, max_length=6)],
        Annotated[int, Field(multiple_of=7, ge=1)],
        Annotated[int, Field(lt=-10)],
        Annotated[int, Field(gt=500)],
    ]
)


def _wrap(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        inner,
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: t | None),
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        inner.map(lambda t: Annotated[list[t], Field(min_length=2, max_length=3)]),  # type: ignore[valid-type]
        st.tuples(inner, inner).map(lambda ts: tuple[ts[0], ts[1]]),  # type: ignore[valid-type]
    )


_names = st.from_regex(r"[a-z][a-z_]{2,10}", fullmatch=True)


@st.composite
def models(draw: st.DrawFn, depth: int = 0) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name in draw(st.lists(_names, min_size=1, max_size=5, unique=True)):
        inner: st.SearchStrategy[Any] = _leaf if depth >= 2 else st.one_of(_leaf, models(depth + 1))
        kind = draw(_wrap(inner))
        optional = draw(st.booleans())
        fields[name] = (kind, None) if optional and "None" in repr(kind) else (kind, ...)
    return create_model(f"M{depth}_{draw(st.integers(0, 999))}", **fields)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=models(), seed=st.integers(0, 2**32), words=st.text(min_size=0, max_size=80))
def test_output_validates_against_random_pydantic_models(
    model: type[BaseModel], seed: int, words: str
) -> None:
    import trio

    request = ask(f"Plan {words}", schema=model.model_json_schema(), max_tokens=100_000)
    completion = trio.run(SimProvider(seed=seed).complete, request)
    model.model_validate_json(completion.text)


# Fixtures -------------------------------------------------------------------------------

FIXTURE = """# SIMULATED OUTPUT: canned answers for sopbus's sim provider; no model wrote them.
simulated = true

[[fixture]]
action = "WritePRD"
match = "snake"
responses = ['{"title": "Snake v1"}', { title = "Snake v2", goals = ["speed"] }]

[[fixture]]
action = "WritePRD"
role = "Carol"
responses = ["Carol's PRD"]
"""


async def test_fixtures_answer_in_order_and_the_last_repeats(tmp_path: Path) -> None:
    path = tmp_path / "prd.toml"
    path.write_text(FIXTURE)
    sim = SimProvider(fixtures=load_fixtures([path]))
    texts = [(await sim.complete(ask())).text for _ in range(3)]
    assert texts == [
        '{"title": "Snake v1"}',
        '{"title":"Snake v2","goals":["speed"]}',
        '{"title":"Snake v2","goals":["speed"]}',
    ]
    first = await sim.complete(ask())
    assert first.usage.completion_tokens == count_text(texts[1], "gpt-4o-mini")
    assert (await sim.complete(ask("a recipe site", role="Carol"))).text == "Carol's PRD"
    generated = await sim.complete(ask("a recipe site"))  # no entry fits: generated
    assert generated.text not in texts and ({"recipe", "site"} & set(generated.text.split()))


async def test_the_answer_depends_on_the_lines_said_not_on_their_layout() -> None:
    def request(*messages: tuple[str, str]) -> LLMRequest:
        return msgspec.structs.replace(ask(), messages=tuple(ChatMessage(*m) for m in messages))

    sim = SimProvider(seed=3)
    schema = {"schema": PRD.model_json_schema()}
    laid_out = [
        request(
            ("system", "You are Alice.\nBook: Snake"), ("user", "Heading: Levels\n\nTask: plan")
        ),
        request(("system", "Book: Snake"), ("user", "Task: plan\nHeading: Levels\nYou are Alice.")),
    ]
    answers = [await sim.complete(msgspec.structs.replace(r, **schema)) for r in laid_out]
    assert answers[0].text == answers[1].text
    other = request(
        ("system", "You are Alice.\nBook: Snake"), ("user", "Heading: Scores\nTask: plan")
    )
    assert (await sim.complete(msgspec.structs.replace(other, **schema))).text != answers[0].text


async def test_a_fixture_longer_than_max_tokens_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "prd.toml"
    path.write_text(FIXTURE)
    sim = SimProvider(fixtures=load_fixtures([path]))
    with pytest.raises(ConfigError, match="max_tokens=2"):
        await sim.complete(ask(max_tokens=2))


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('[[fixture]]\naction = "A"\nresponses = ["x"]\n', "simulated = true"),
        ("simulated = true\n", "no [[fixture]] entries"),
        ('simulated = true\n[[fixture]]\naction = "A"\n', "non-empty responses"),
        (
            'simulated = true\n[[fixture]]\naction = "A"\nresponses = ["x"]\nreply = 1\n',
            "unknown key(s) reply",
        ),
        ("simulated = true\n[[fixture]\n", "the fixture file is not valid TOML"),
    ],
)
def test_fixture_file_mistakes_name_the_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_fixtures([path])
    assert fragment in str(info.value) and str(path) in str(info.value)
