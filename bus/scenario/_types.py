"""The shape of a scenario file, as frozen msgspec Structs.

Each table of the TOML file is one Struct; ``forbid_unknown_fields`` makes a typo an error
instead of a silently ignored key. Field names are the TOML keys (except where a TOML key
clashes with a clearer Python name: ``[scenario]`` is ``Scenario.info`` and the ``[sop]``
table is ``Scenario.sop_options``). Ranges msgspec can check are on the types
(``Meta(ge=1)``); the rest (money, files, cross-field rules) is checked by
:func:`sopbus.bus.load_scenario` with the same kind of ``$.path`` in the message.

In ``[[roles]]`` and in ``llm = {...}`` overrides, ``None`` means "not given": a role
entry may override some fields of a SOP's role of the same name and keep the others.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from .._errors import ConfigError
from ._extra import merged_extra
from ._graph import GraphSpec
from ._paths import inside, outside_problem, place_of
from ._population import PopulationSpec
from ._tools import DEFAULT_MAX_TOOL_STEPS, A2AAgent, McpServer, ToolChoice
from ._typespec import parse_type_spec

DEFAULT_PROVIDER = "sim"
"""The provider of a scenario that names none: the simulator (no key, no network)."""

ProviderName = str
"""A registered provider's name (``sim``, ``openai``...) or a user's ``"module:Class"``;
checked against the registry (:mod:`sopbus.bus.scenario._providers`) when the file is loaded."""
RunMode = Literal["rounds", "events"]
OutputMode = Literal["json_schema", "prompt"]
MaxTokensParam = Literal["max_completion_tokens", "max_tokens"]
ReactMode = Literal["by_order", "react", "plan_and_act"]
SandboxBackend = Literal["auto", "bwrap", "local"]

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
Temperature = Annotated[float, msgspec.Meta(ge=0.0, le=2.0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0.0)]
MAX_LATENCY_MS = 600_000
"""The simulator's longest latency: ten minutes is more than any real call; a larger value
(2^63 ms was accepted once) only hangs a run."""
LatencyMs = Annotated[int, msgspec.Meta(ge=0, le=MAX_LATENCY_MS)]
MAX_ROUNDS = 100_000
"""The largest round limit: each round is at least one turn of a role, so a run that needs
more is a loop, and a 23-digit limit (accepted once) is no limit at all."""
RoundLimit = Annotated[int, msgspec.Meta(ge=1, le=MAX_ROUNDS)]
MAX_BUDGET_USD = Decimal(1_000_000)
"""The largest budget cap of a run (or a sweep): a million dollars is no limit any LLM run
meets, and it keeps every sum of the ledger exact in ``Decimal``'s 28 digits; ``1e26``
(accepted once) could not even be printed to the cent."""
MAX_TIMEOUT_S = 86_400.0
"""The longest timeout of one LLM call, a day: above any CPU generation; ``inf`` (accepted
once) let a stuck server hold a run forever."""
MAX_SANDBOX_MB = 65_536
SandboxMB = Annotated[int, msgspec.Meta(ge=1, le=MAX_SANDBOX_MB)]
TimeoutS = Annotated[float, msgspec.Meta(gt=0.0, le=MAX_TIMEOUT_S)]
DEFAULT_TIMEOUT_S = 600.0
"""A whole call's bound: ten minutes, the openai SDK's own default. A CPU server wrote 300
tokens in 45-150 s, so a 1024-token answer can take five minutes and more."""
DEFAULT_IDLE_TIMEOUT_S = 60.0
"""The longest silence inside a streamed answer once it began: the slowest CPU server seen
sent a token every 0.5 s, so a minute without one means the server stalled, noticed well
before the ten minutes of ``timeout_s``."""


class ScenarioInfo(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[scenario]``: what the scenario is and what starts it.

    ``sop`` is a built-in SOP's name or ``"module:attribute"``; ``idea`` becomes the first
    message (``cause_by="UserRequirement"``, ``sent_from="Boss"``). ``allow_outside`` lets
    the files the scenario names (fixtures, cassette, ``[sop]`` data) be outside its folder
    (``..``, absolute paths, links out of it); by default they must be inside.
    """

    name: str
    description: str = ""
    sop: str | None = None
    idea: str | None = None
    allow_outside: bool = False


class RunSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[run]``: limits and scheduling of a run. ``runs_dir`` is relative to the current
    directory; ``budget_usd`` is a ``Decimal`` (> 0) however the file wrote it."""

    max_rounds: RoundLimit = 10
    budget_usd: Decimal = Decimal("3")
    seed: int = 0
    mode: RunMode = "rounds"
    runs_dir: str = "runs"


class LLMOverrides(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A partial ``llm = {...}`` on a role or an action; ``None`` keeps the outer value.

    The provider, its address and its files are set once per run in ``[llm]``, so they
    are not overridable here.
    """

    model: str | None = None
    temperature: Temperature | None = None
    max_tokens: PositiveInt | None = None
    output_mode: OutputMode | None = None
    stream: bool | None = None
    timeout_s: TimeoutS | None = None
    idle_timeout_s: TimeoutS | None = None
    max_attempts: PositiveInt | None = None
    extra_body: dict[str, Any] | None = None  # merged key by key over the outer table


class LLMConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[llm]``: the provider and the default model settings of every call.

    ``max_tokens_param`` is the request field that carries ``max_tokens`` to an ``openai``
    server: ``max_completion_tokens`` (OpenAI's) or ``max_tokens`` (for backends that reject
    the newer name; dropping the field instead would drop the bound the reservation counts on).
    ``provider`` names a registered provider or a user's ``"module:Class"`` (see
    :func:`sopbus.bus.llm.register_provider`). ``base_url`` is used by the providers that
    declare it (``openai``), ``latency_ms`` and ``fixtures`` by ``sim`` only, ``cassette`` by
    ``replay`` only; the others ignore them, so one file can be run
    with ``--provider`` switched. ``fixtures`` and ``cassette`` are relative to the
    scenario file: use :meth:`Scenario.fixture_paths` / :meth:`Scenario.cassette_path`.
    ``extra_body`` is sent as it is with each ``openai`` request (server sampling settings
    such as ``repeat_penalty``; see :mod:`sopbus.bus.scenario._extra`); the simulator ignores it.

    ``max_tokens``, when given, is every action's (it replaces a built-in action's own default,
    WriteCode's 4096, up or down); an action's or role's ``llm = { max_tokens = ... }`` wins
    over it. ``None`` (not given): each action's own default, else
    1024.

    ``stream`` ``None`` (not given) is the provider's default: on for ``openai`` (a server that
    refuses streams is asked without, once, for the rest of the run), off for ``sim``.
    ``timeout_s`` bounds a whole call; ``idle_timeout_s`` bounds the silence inside a streamed
    answer once its first piece came (a server's queue and its reading of the prompt send
    nothing, and can take minutes on a CPU, so they are bounded by ``timeout_s`` alone).

    ``tokenize`` lets an ``openai`` server that counts tokens (llama.cpp's and vLLM's
    ``/tokenize``) count each prompt for its reservation; ``false`` keeps sopbus's own bound.
    """

    provider: ProviderName = DEFAULT_PROVIDER
    model: str = "gpt-4o-mini"
    temperature: Temperature = 0.2
    max_tokens: PositiveInt | None = None
    base_url: str | None = None
    output_mode: OutputMode = "json_schema"
    stream: bool | None = None
    timeout_s: TimeoutS = DEFAULT_TIMEOUT_S
    idle_timeout_s: TimeoutS = DEFAULT_IDLE_TIMEOUT_S
    max_attempts: PositiveInt = 3
    max_tokens_param: MaxTokensParam = "max_completion_tokens"
    latency_ms: LatencyMs = 0
    fixtures: tuple[str, ...] = ()
    cassette: str | None = None
    extra_body: dict[str, Any] | None = None
    tokenize: bool = True

    def merged(self, *overrides: LLMOverrides | None) -> LLMConfig:
        """These settings with each override's given (non-``None``) fields laid on top, in
        order: ``scenario.llm.merged(role.llm, action.llm)``."""
        result = self
        for override in overrides:
            if override is not None:
                given = {
                    f: v
                    for f in override.__struct_fields__
                    if (v := getattr(override, f)) is not None
                }
                if "extra_body" in given:
                    given["extra_body"] = merged_extra(result.extra_body, given["extra_body"])
                result = msgspec.structs.replace(result, **given)
        return result


class SandboxSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[sandbox]``: how model-written code runs. ``backend``: ``"bwrap"`` (bubblewrap
    namespaces; a configuration error where it is missing), ``"local"`` (no isolation), or
    ``"auto"`` (bwrap when installed, else local with a warning for a real model's code).
    ``scratch_mb``: what the files in the code's working directory may total (a run that
    passes it is stopped; at most that much is kept); ``tmp_mb``: the size of its ``/tmp``
    and of its home directory."""

    backend: SandboxBackend = "auto"
    scratch_mb: SandboxMB = 256
    tmp_mb: SandboxMB = 256


class PriceSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[prices."<model>"]``: USD per 1M tokens (each >= 0). ``cached_input`` (prompt
    tokens read from the provider's cache) and ``cache_write`` (written to it) default to
    ``input`` in the price book."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    cache_write: Decimal | None = None


class WatchSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A ``watch`` entry that names senders: ``{ action = "Post", from = ["Alice"] }``
    watches ``Post`` from Alice only (a sender subscription). The names in ``from`` are
    checked against the team's roles when the team is built."""

    action: str
    senders: tuple[str, ...] = msgspec.field(name="from")


class RoleSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[roles]]`` entry: a new role, or an override of the SOP's role ``name``.

    Every field but ``name`` is ``None`` when the file does not give it; ``sopbus.roles`` fills
    defaults for new roles and keeps the SOP's values for overridden ones. Names in
    ``watch`` and ``actions`` are checked against the action registry when the team is
    built, not here; a name written ``"module:Class"`` is a Python Action class, imported
    (beside the scenario file first) when the team is built. ``class`` (``cls`` here) makes
    a new role an instance of a Python Role class, ``"module:Class"``, with the entry's
    other fields laid over the class's.
    """

    name: str
    cls: str | None = msgspec.field(default=None, name="class")
    profile: str | None = None
    goal: str | None = None
    constraints: str | None = None
    aliases: tuple[str, ...] | None = None
    watch: tuple[str | WatchSpec, ...] | None = None
    actions: tuple[str, ...] | None = None
    send_to: tuple[str, ...] | None = None
    # Roles whose actions this one watches, from them only (shorthand for a watch entry
    # { action = A, from = [name] } for each action A the named role takes).
    follows: tuple[str, ...] | None = None
    react_mode: ReactMode | None = None
    max_react_steps: PositiveInt | None = None
    llm: LLMOverrides | None = None
    human: bool | None = None  # answered by a person (terminal or --human-input), not a model
    agent: str | None = None  # "a2a.NAME": answered by the remote A2A agent [a2a.NAME]


class ActionSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[actions.<Name>]``: an action declared in the file (its name is the table key).

    ``output`` maps field names to type specs (``"list[str]"``); ``None`` means free text.
    ``artifact`` is the file under ``artifacts/`` each result is written to, with
    placeholders ``{role}``, ``{round}``, ``{action}`` (checked when the team is built).
    ``tools`` names the tools the model may call (``"git.git_log"``, ``"git.*"``,
    ``"py.NAME"``); ``max_tool_steps`` bounds the tool loop of each ask, ``tool_choice``
    says what it asks of the model (docs/tools.md).
    """

    instruction: str
    output: dict[str, str] | None = None
    max_repairs: NonNegativeInt = 2
    llm: LLMOverrides | None = None
    artifact: str | None = None
    tools: tuple[str, ...] = ()
    max_tool_steps: PositiveInt = DEFAULT_MAX_TOOL_STEPS
    tool_choice: ToolChoice | None = None

    def output_types(self) -> dict[str, Any] | None:
        """``output`` with each spec parsed into a Python type (``{"problems": list[str]}``),
        ready for ``pydantic.create_model``; ``None`` for free text. The specs were checked
        when the scenario was loaded."""
        if self.output is None:
            return None
        return {field: parse_type_spec(spec) for field, spec in self.output.items()}


class InjectSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[inject]]`` entry: a message the run publishes at the start of ``round``
    (a board write, a user's edit), as if ``sent_from`` had sent it."""

    round: NonNegativeInt
    cause_by: str = "UserEdit"
    sent_from: str = "User"
    send_to: tuple[str, ...] = ()
    content: str = ""
    payload: Any = None


class SweepSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[sweep]``: what ``sopbus sweep`` runs of this scenario (``sopbus run`` ignores it).

    ``seeds`` is a count (``5``: seeds 0 to 4), a range (``"3..7"``) or a list; ``set`` maps
    dotted keys of the file to the values to try (``"llm.model" = ["gpt-4o-mini", "gpt-4o"]``),
    the variants being every combination; ``budget_usd`` is the whole sweep's cap. The
    command line's flags win over these.
    """

    seeds: int | str | tuple[int, ...] | None = None
    set: dict[str, Any] = {}
    jobs: PositiveInt | None = None
    budget_usd: Decimal | None = None


ANSWER_PLACE = r"^(last_message|artifact:\S+|output:[A-Za-z_]\w*\.[A-Za-z_][\w.]*)$"
"""Where ``sopbus eval`` reads a run's answer: ``last_message`` (the content of the run's
last message), ``artifact:NAME`` (a file under ``artifacts/``) or ``output:Action.field``
(a field of the payload of the last message that action produced)."""
AnswerPlace = Annotated[str, msgspec.Meta(pattern=ANSWER_PLACE)]
CheckTimeoutS = Annotated[float, msgspec.Meta(gt=0.0, le=3600.0)]


class EvalSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[eval]``: how ``sopbus eval`` gives this scenario a task and reads its answer
    (``sopbus run`` ignores it). ``idea`` is a template of the first message, filled with
    the task's input (``{input}``) or its named inputs; ``check_timeout_s`` bounds each
    sandboxed check of an answer."""

    answer: AnswerPlace = "last_message"
    idea: str | None = None
    check_timeout_s: CheckTimeoutS = 3.0


class ScenarioDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A scenario file as written: every table, nothing resolved. See :class:`Scenario`."""

    info: ScenarioInfo = msgspec.field(name="scenario")
    run: RunSettings = RunSettings()
    llm: LLMConfig = LLMConfig()
    prices: dict[str, PriceSpec] = {}
    sandbox: SandboxSpec = SandboxSpec()
    sop_options: dict[str, Any] = msgspec.field(default_factory=dict, name="sop")
    roles: tuple[RoleSpec, ...] = ()
    actions: dict[str, ActionSpec] = {}
    inject: tuple[InjectSpec, ...] = ()
    sweep: SweepSpec | None = None
    mcp: dict[str, McpServer] = {}
    a2a: dict[str, A2AAgent] = {}
    eval: EvalSpec | None = None
    populations: tuple[PopulationSpec, ...] = ()
    graph: GraphSpec | None = None


class Scenario(ScenarioDoc, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A loaded scenario: the file's content plus where it came from.

    ``path`` is the file (absolute); ``base_dir`` its directory, against which
    ``llm.fixtures`` and ``llm.cassette`` are resolved. Build one with
    :func:`sopbus.bus.load_scenario`; change it with :func:`sopbus.bus.scenario_with_overrides`.
    """

    path: Path
    base_dir: Path
    # Models whose [prices] entry came from --price (price=); not part of the file, so a
    # run directory's scenario.toml holds the price as an ordinary [prices] table.
    priced_by_flag: frozenset[str] = frozenset()
    # Python classes a sopbus.Team names by "module:Class" in its [[roles]], handed over in
    # the same process (a script's or a test's own classes need no import); not part of the
    # file, which names them by reference only. Resolved by sopbus.sops.build_team.
    classes: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def sop(self) -> str | None:
        return self.info.sop

    @property
    def idea(self) -> str | None:
        return self.info.idea

    def resolve(self, relative: str) -> Path:
        """A path written in the file, resolved against the file's directory; a
        :class:`~sopbus.bus.ConfigError` when it leaves that directory and the file does not say
        ``allow_outside = true`` (see :mod:`sopbus.bus.scenario._paths`)."""
        path = self.base_dir / relative
        if not self.info.allow_outside and not inside(path, self.base_dir):
            place = place_of(relative, self.llm, self.sop_options, self.populations)
            what, fix = outside_problem(relative, self.base_dir)
            raise ConfigError(f"{self.path}: {what} - at `{place}`: {fix}")
        return path

    def fixture_paths(self) -> tuple[Path, ...]:
        return tuple(self.resolve(f) for f in self.llm.fixtures)

    def cassette_path(self) -> Path | None:
        return None if self.llm.cassette is None else self.resolve(self.llm.cassette)

    def price_table(self) -> dict[str, dict[str, Decimal]]:
        """``[prices]`` as ``PriceBook.load`` takes it: ``{model: {"input": ..., ...}}``."""
        return {
            model: {k: v for k in p.__struct_fields__ if (v := getattr(p, k)) is not None}
            for model, p in self.prices.items()
        }
