"""HumanEval, solo: one engineer writes the function from its prompt, in one call.

The idea is a HumanEval prompt (a signature with its docstring). ``FunctionEngineer``
answers with the whole function; its ``WriteFunction`` message is the run's last message,
its content the code, and the same code is the artifact ``solution.py``: where an eval
reads the answer. This is the baseline of MetaGPT's executable-feedback ablation;
``humaneval_reviewed`` is the same engineer with a reviewer and a tester.

The verdict: the answer is Python that defines the function the prompt names. (Whether
it is right is the eval's to score, with the dataset's own tests.) No ``[sop]`` options.
"""

from __future__ import annotations

import ast

import msgspec

from sopbus.bus import RunRecord, Verdict
from sopbus.roles.company import FunctionEngineer, WriteFunction, entry_point

from .. import _sop
from .._sop import SopContext, Team

ENGINEER = "Engineer"


class SoloOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """No options: an unknown key in ``[sop]`` is an error, not silently ignored."""


def build(ctx: SopContext) -> Team:
    ctx.options_as(SoloOptions)
    engineer = FunctionEngineer(name=ENGINEER, llm_defaults=ctx.llm_defaults, registry=ctx.registry)
    return Team(roles=[engineer], verdict=defines_function)


def defines_function(record: RunRecord) -> Verdict:
    """The solo verdict: the last answer parses as Python and defines the prompt's function."""
    answer, spec = record.last(WriteFunction.name), record.last("UserRequirement")
    if answer is None:
        return Verdict(passed=False, reason=f"no function was written ({record.end_reason})")
    return answer_defines(answer.content, spec.content if spec else "")


def answer_defines(code: str, prompt: str) -> Verdict:
    """Whether ``code`` parses and defines the function ``prompt`` asks for."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return Verdict(
            passed=False, reason=f"the answer is not Python: line {exc.lineno}: {exc.msg}"
        )
    name = entry_point(prompt)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    if name is not None and name not in defined:
        return Verdict(passed=False, reason=f"the answer does not define {name}()")
    return Verdict(passed=True, reason=f"the answer defines {name or 'a function'}()")


SOP = _sop.SOP(
    name="humaneval_solo",
    description="HumanEval solo: one engineer writes the function from its prompt "
    "(the answer: the last message and solution.py)",
    build=build,
)
