"""The simulated provider: deterministic answers with real token counts, no network.

An answer is a function of ``(seed, request)``. For a request with a JSON schema it is JSON
text that validates against the schema (objects, arrays, tuples, strings with formats and
lengths, enums, consts, numbers with bounds, booleans, ``$defs``/``$ref``, ``anyOf``/
``oneOf``/``allOf``, optional fields: what pydantic's ``model_json_schema()`` produces;
``pattern`` is not honoured). Strings are sentences made of the prompt's own words and the
field's name, so the content changes with the input and reads like a draft. The request is
read as the sorted set of its lines (:func:`said`), whichever message and place each line is
in: a prompt laid out anew with the same lines gets the same answer, so a change of layout
(the stable part first, for prefix caches) is seen to keep every message of a run. For free text
it is a paragraph of the same kind. The completion never passes ``max_tokens``: a long answer
is redrawn terse, and cut at the limit if still too long (as a server cuts it).

Usage is counted with the tokenizer (:func:`sopbus.bus.llm._tokens.count_prompt` for the prompt), never
invented. ``latency_ms`` (a number or a ``(low, high)`` range drawn per request) sleeps on
trio's clock, so concurrency shows, and ``autojump_clock`` makes it instant in tests.

Fixtures (canned answers a scenario names) are read by :mod:`sopbus.bus.llm._fixtures`.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import uuid
import zlib
from _random import Random as _CoreRandom
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .._errors import ConfigError
from .._protocol import Completion, LiveFeed, LLMRequest, ProviderBase, ToolCall, Usage
from ..scenario import register_provider
from ._fixtures import Fixture, load_fixtures
from ._tokens import count_prompt, count_text, truncate_to_tokens

_json = msgspec.json.Encoder()
_UNSEEDED = ("idle_timeout_s",)
"""Request fields added after the seed was fixed, and left out of it: a transport setting
says nothing about the answer, and hashing it would change every simulated run's messages."""
_reseed = _CoreRandom.seed
_MAX_DEPTH = 6
_STOPWORDS = frozenset(
    "about above after again against also because been before being below between both "
    "could does doing down during each from further have having here into itself just more "
    "most must only other ought over same should some such than that their theirs them then "
    "there these they this those through under until very were what when where which while "
    "with would your yours will shall json schema answer write return output field fields "
    "object string value values following given using based make".split()
)
_FALLBACK_WORDS = ("plan", "design", "module", "interface", "feature", "test", "review", "data")


if TYPE_CHECKING:
    from ..scenario import Scenario


class SimProvider(ProviderBase):
    """The embedded default provider (see the module docstring)."""

    name = "sim"

    def __init__(
        self,
        seed: int = 0,
        latency_ms: float | tuple[float, float] = 0,
        fixtures: Sequence[Fixture] | None = None,
        stream: bool = False,
    ):
        self.seed = seed
        self.latency_ms = latency_ms
        self.fixtures = tuple(fixtures or ())
        self._used = [0] * len(self.fixtures)
        self.stream = stream
        self.live: LiveFeed | None = None  # set by the live view: streamed text goes there

    async def complete(self, request: LLMRequest) -> Completion:
        seed = self._rng_seed(request)
        rng = random.Random(seed)
        delay_ms = self._latency(rng)
        calls: tuple[ToolCall, ...] = ()
        if self.stream and self.live is not None:
            text, calls = self._answer(request, rng, seed)
            await self._trickle(request, text, delay_ms / 1000)
        else:
            if delay_ms > 0:
                await trio.sleep(delay_ms / 1000)
            text, calls = self._answer(request, rng, seed)
        return self._completion(request, text, calls)

    @property
    def batches(self) -> bool:  # type: ignore[override]
        """Without latency or a live stream to show, answers need no waiting: a whole batch
        is answered in one loop (:meth:`complete_batch`), each as :meth:`complete` would."""
        return not self.latency_ms and not (self.stream and self.live is not None)

    def complete_batch(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        out = []
        rng = random.Random()
        for request in requests:
            seed = self._rng_seed(request)
            # The state random.Random(seed) starts in, at half the cost of a new generator
            # (what Random.seed does for an int, without its Python wrapper).
            _reseed(rng, seed)
            rng.gauss_next = None  # type: ignore[attr-defined]
            self._latency(rng)  # drawn as complete() draws it, so the answer is the same
            out.append(self._completion(request, *self._answer(request, rng, seed)))
        return out

    def _completion(
        self, request: LLMRequest, text: str, calls: tuple[ToolCall, ...]
    ) -> Completion:
        if calls:
            return self._asking(request, calls)
        usage = Usage(
            prompt_tokens=count_prompt(request), completion_tokens=count_text(text, request.model)
        )
        # An answer that fills max_tokens was cut there (_generate cuts a long one), as a
        # server says it.
        cut = usage.completion_tokens >= request.max_tokens
        return Completion(
            text=text,
            usage=usage,
            model=request.model,
            provider=self.name,
            finish_reason="length" if cut else "stop",
        )

    def _answer(
        self, request: LLMRequest, rng: random.Random, seed: int
    ) -> tuple[str, tuple[ToolCall, ...]]:
        found = self._fixture_answer(request)
        if found is None or not (found[0] or found[1]):  # an empty canned text: a drawn one
            return _generate(request, rng, lambda: self._drawn(seed)), ()
        return found

    def _drawn(self, seed: int) -> random.Random:
        """The generator an answer is drawn with, made anew from its ``seed``."""
        rng = random.Random(seed)
        self._latency(rng)
        return rng

    def _asking(self, request: LLMRequest, calls: tuple[ToolCall, ...]) -> Completion:
        """An answer that asks for ``calls``, counted as the JSON a server would send."""
        sent = " ".join(f"{call.id} {call.name} {call.arguments}" for call in calls)
        usage = Usage(
            prompt_tokens=count_prompt(request), completion_tokens=count_text(sent, request.model)
        )
        return Completion(
            text="",
            usage=usage,
            model=request.model,
            provider=self.name,
            finish_reason="tool_calls",
            tool_calls=calls,
        )

    async def _trickle(self, request: LLMRequest, text: str, seconds: float) -> None:
        """The answer piece by piece over the call's latency, as a streaming server sends it."""
        assert self.live is not None
        pieces = re.findall(r"\S+\s*|\s+", text) or [text]
        call = self.live.open(request)
        try:
            for piece in pieces:
                await trio.sleep(seconds / len(pieces))
                self.live.feed(call, piece)
        finally:
            self.live.close(call)

    def _rng_seed(self, request: LLMRequest) -> int:
        digest = hashlib.blake2b(digest_size=8, key=str(self.seed).encode())
        digest.update(_seed_text(msgspec.structs.replace(request, messages=())))
        digest.update(_json.encode(said(request)))
        return int.from_bytes(digest.digest(), "big")

    def _latency(self, rng: random.Random) -> float:
        if isinstance(self.latency_ms, tuple):
            return rng.uniform(*self.latency_ms)
        return float(self.latency_ms)

    def show_live(self, feed: LiveFeed) -> None:
        if self.stream:
            self.live = feed

    def observe(self, request: LLMRequest) -> None:
        """Counts ``request`` as answered without answering it. A resume or a fork takes the
        answers of recorded calls from the run's tape; telling the simulator moves each
        fixture's ``responses`` on as the recorded call did, so the next live call gets the
        response the uninterrupted run got (not the first one again)."""
        i = self._fitting(request)
        if i is not None:
            self._used[i] += 1

    def _fitting(self, request: LLMRequest) -> int | None:
        """The index of the first fixture that fits ``request``, if any."""
        if not self.fixtures:
            return None
        prompt = "\n".join(message.content for message in request.messages)
        return next((i for i, f in enumerate(self.fixtures) if f.fits(request, prompt)), None)

    def _fixture_answer(self, request: LLMRequest) -> tuple[str, tuple[ToolCall, ...]] | None:
        i = self._fitting(request)
        if i is None:
            return None
        fixture = self.fixtures[i]
        which = min(self._used[i], len(fixture.responses) - 1)
        text = fixture.responses[which]
        self._used[i] += 1
        if fixture.calls and fixture.calls[which]:
            # Ids are the model's; the simulator's depend only on the fixture and the use, so
            # a replay and a resume see the same ids.
            return "", tuple(
                msgspec.structs.replace(call, id=f"call_{i}_{self._used[i]}_{k}")
                for k, call in enumerate(fixture.calls[which])
            )
        if count_text(text, request.model) > request.max_tokens:
            raise ConfigError(
                f"{fixture.source} answers {request.action} with more than "
                f"max_tokens={request.max_tokens} tokens; shorten the "
                "fixture or raise the action's max_tokens"
            )
        return text, ()


def _seed_text(request: LLMRequest) -> bytes:
    """What an answer is drawn from: the request's JSON, without ``tools`` when it offers
    none and without the transport fields added later (``_UNSEEDED``), so that every answer
    drawn before those existed is drawn again the same."""
    fields = msgspec.structs.asdict(request)
    for name in _UNSEEDED:
        del fields[name]
    if not request.tools:
        del fields["tools"]
    if request.tool_choice is None:
        del fields["tool_choice"]
    return _json.encode(fields)


def _generate(
    request: LLMRequest, rng: random.Random, again: Callable[[], random.Random] | None = None
) -> str:
    """An answer drawn with ``rng``; one too long is drawn terse with ``again()``, a
    generator in the state ``rng`` was given in (made anew: cheaper than saving a state;
    without ``again``, ``rng``'s state is saved)."""
    if again is None:
        state = rng.getstate()

        def again() -> random.Random:
            rng.setstate(state)
            return rng

    found: list[list[str]] = []

    def words() -> list[str]:
        if not found:
            found.append(_prompt_words(request))
        return found[0]

    for terse in (False, True):
        filler = _Filler(words, rng if not terse else again(), terse, request.schema or {})
        text = filler.answer(request.schema)
        if count_text(text, request.model) <= request.max_tokens:
            return text
    return truncate_to_tokens(text, request.model, request.max_tokens)


def said(request: LLMRequest) -> list[str]:
    """What ``request`` says, whatever its layout: its non-blank lines, sorted."""
    return sorted(
        line
        for message in request.messages
        for line in message.content.splitlines()
        if line.strip()
    )


def _prompt_words(request: LLMRequest) -> list[str]:
    # The words the prompt uses most come first (what it is about), then the longer ones
    # (names and terms over short filler); never by where a word stands, so that the layout
    # of the prompt does not change the answer.
    counts: Counter[str] = Counter()
    for line in said(request):
        for word in re.findall(r"[A-Za-z][A-Za-z-]{3,}", line):
            lower = word.lower().strip("-")
            if lower not in _STOPWORDS and len(lower) > 3:
                counts[lower] += 1
    ranked = sorted(counts, key=lambda w: (-counts[w], -len(w), zlib.crc32(w.encode())))
    return ranked[:40] or list(_FALLBACK_WORDS)


_TEMPLATES = (
    "{A} should cover {b} and {c}.",
    "The {f} keeps {b} simple and makes {c} explicit.",
    "We handle {b} before {c} to reduce risk.",
    "Users need clear {b} when they work with {c}.",
    "{A} is checked against {c} in the tests.",
    "Start with {b}, then extend it to {c}.",
)


class _Filler:
    """Draws a JSON instance of a schema, words first taken from the prompt."""

    def __init__(
        self,
        words: Callable[[], list[str]],
        rng: random.Random,
        terse: bool,
        root: Mapping[str, Any],
    ):
        self._words_of = words
        self._words: list[str] | None = None
        self.rng = rng
        self.terse = terse
        self.root = root

    def answer(self, schema: Mapping[str, Any] | None) -> str:
        if schema is None:
            return " ".join(
                self.sentence("answer") for _ in range(1 if self.terse else self.rng.randint(3, 5))
            )
        return _json.encode(self.value(schema, "answer", 0)).decode()

    @property
    def words(self) -> list[str]:
        """The prompt's words, found when a string first needs them (a schema of numbers
        never does, and finding them is most of an answer's time)."""
        if self._words is None:
            self._words = self._words_of()
        return self._words

    def word(self) -> str:
        # Early words weigh more: a draft talks mostly about what was just asked.
        index = min(int(self.rng.expovariate(0.25)), len(self.words) - 1)
        return self.words[index]

    def sentence(self, field: str) -> str:
        a, b, c = self.word(), self.word(), self.word()
        if c == b and len(self.words) > 1:
            c = self.words[(self.words.index(b) + 1) % len(self.words)]
        return self.rng.choice(_TEMPLATES).format(A=a.capitalize(), b=b, c=c, f=_human(field))

    def value(self, schema: Mapping[str, Any], field: str, depth: int) -> Any:
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng.choice(list(schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.value(self.branch(schema[key], depth), field, depth)
        if "allOf" in schema:
            return self.value(self.merge(schema["allOf"]), field, depth)
        kind = self.kind(schema)
        make = getattr(self, f"make_{kind}")
        return make(schema, field, depth)

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in schema:
            target: Any = self.root
            for part in schema["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return schema

    def branch(self, options: Sequence[Mapping[str, Any]], depth: int) -> Mapping[str, Any]:
        resolved = [self.resolve(option) for option in options]
        real = [option for option in resolved if option.get("type") != "null"]
        if not real or (depth >= _MAX_DEPTH and len(real) < len(resolved)):
            return {"type": "null"}
        return self.rng.choice(real)

    def merge(self, parts: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        merged: dict[str, Any] = {}
        for part in map(self.resolve, parts):
            properties = {**merged.get("properties", {}), **part.get("properties", {})}
            required = [*merged.get("required", []), *part.get("required", [])]
            merged.update(part)
            if properties:
                merged["properties"], merged["required"] = properties, required
        return merged

    def kind(self, schema: Mapping[str, Any]) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            real = [k for k in kind if k != "null"]
            kind = real[0] if real else "null"
        if kind is None:
            kind = (
                "object" if "properties" in schema else "array" if "items" in schema else "string"
            )
        return str(kind)

    def make_null(self, schema: Mapping[str, Any], field: str, depth: int) -> None:
        return None

    def make_boolean(self, schema: Mapping[str, Any], field: str, depth: int) -> bool:
        return self.rng.random() < 0.7

    def make_object(self, schema: Mapping[str, Any], field: str, depth: int) -> dict[str, Any]:
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        out = {
            name: self.value(sub, name, depth + 1)
            for name, sub in properties.items()
            if name in required or depth < _MAX_DEPTH
        }
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, Mapping):
            for _ in range(max(schema.get("minProperties", 0), 1 if self.terse else 2)):
                out[self.word()] = self.value(extra, field, depth + 1)
        return out

    def make_array(self, schema: Mapping[str, Any], field: str, depth: int) -> list[Any]:
        if "prefixItems" in schema:
            return [self.value(sub, field, depth + 1) for sub in schema["prefixItems"]]
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", max(low, 4))
        want = 1 if self.terse else self.rng.randint(2, 4)
        count = low if depth >= _MAX_DEPTH else min(max(want, low), high)
        items = schema.get("items", {})
        out: list[Any] = []
        for _ in range(count * 4 if schema.get("uniqueItems") else count):
            value = self.value(items, _singular(field), depth + 1)
            if not schema.get("uniqueItems") or value not in out:
                out.append(value)
            if len(out) == count:
                break
        return out

    def make_integer(self, schema: Mapping[str, Any], field: str, depth: int) -> int:
        low, high = _bounds(schema, 1, 5 if "priorit" in field else 100, step=1)
        low, high = math.ceil(low), math.floor(high)
        value = self.rng.randint(low, high) if low <= high else low
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            value = -(-value // step) * step
            if value > high:
                value -= step
        return value

    def make_number(self, schema: Mapping[str, Any], field: str, depth: int) -> float:
        low, high = _bounds(schema, 0.0, 100.0, step=0.01)
        value = round(self.rng.uniform(low, high), 2)
        return min(max(value, low), high)

    def make_string(self, schema: Mapping[str, Any], field: str, depth: int) -> str:
        text = self.formatted(schema.get("format"), field) or self.by_name(field)
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        while len(text) < low:
            text += " " + self.sentence(field)
        if high is not None and len(text) > high:
            cut = text[:high].rstrip()
            text = cut if len(cut) >= low else text[:high]
        return text

    def formatted(self, fmt: str | None, field: str) -> str | None:
        rng, w = self.rng, self.word()
        made = {
            "date-time": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
            "date": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "time": f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
            "duration": f"PT{rng.randint(1, 8)}H",
            "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "email": f"{w}@example.com",
            "uri": f"https://example.com/{w}",
            "ipv4": f"192.0.2.{rng.randint(1, 254)}",
        }
        return made.get(fmt) if fmt else None

    def by_name(self, field: str) -> str:
        name, w = field.lower(), self.word()
        if any(hint in name for hint in ("name", "title", "heading")):
            return " ".join(self.word().capitalize() for _ in range(self.rng.randint(1, 3)))
        if any(hint in name for hint in ("tag", "keyword", "label")):
            return w
        if "email" in name:
            return f"{w}@example.com"
        if any(hint in name for hint in ("path", "file")):
            return f"src/{w.replace('-', '_')}_{self.word().replace('-', '_')}.py"
        if "url" in name or "link" in name:
            return f"https://example.com/{w}"
        if name.endswith("id"):
            return f"{w}-{self.rng.randint(1, 999)}"
        if "code" in name:
            return f"def {w.replace('-', '_')}():\n    return {self.word()!r}\n"
        if self.terse:
            return f"{w.capitalize()} {self.word()}"
        return " ".join(self.sentence(field) for _ in range(self.rng.randint(1, 2)))


def _bounds(
    schema: Mapping[str, Any], low: float, high: float, *, step: float
) -> tuple[float, float]:
    if "minimum" in schema:
        low = schema["minimum"]
    if "exclusiveMinimum" in schema:
        low = schema["exclusiveMinimum"] + step
    if "maximum" in schema:
        high = schema["maximum"]
    if "exclusiveMaximum" in schema:
        high = schema["exclusiveMaximum"] - step
    if high < low:  # only one side given, and the default other side is on the wrong side
        high, low = (
            (low + 100, low)
            if "minimum" in schema or "exclusiveMinimum" in schema
            else (high, high - 100)
        )
    return low, high


def _human(field: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])|_", " ", field).lower()


def _singular(field: str) -> str:
    return field[:-1] if field.endswith("s") and len(field) > 3 else field


def sim_from_scenario(scenario: Scenario, environ: Mapping[str, str]) -> SimProvider:
    """``[llm].provider = "sim"``: seeded by ``[run].seed``, answering from ``[llm].fixtures``."""
    llm = scenario.llm
    return SimProvider(
        seed=scenario.run.seed,
        latency_ms=llm.latency_ms,
        fixtures=load_fixtures(scenario.fixture_paths()),
        stream=bool(llm.stream),  # not given: off (the live view shows no trickle)
    )


register_provider("sim", sim_from_scenario, simulated=True)
