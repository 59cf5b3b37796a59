"""The completion a careful user extracts from a model's answer to a HumanEval prompt.

Models answer as they like: a fenced block or bare code, with prose around it, a whole
function (the prompt repeated or not) or only the body. HumanEval's harness runs
``prompt + completion``, so each form becomes the completion that makes that program the
function the model meant:

* the answer repeats the prompt: what follows it;
* a whole function (``def entry_point`` at the top level): the code after a newline, so it
  replaces the prompt's stub and keeps the prompt's imports and helpers;
* only the body: its lines indented under the prompt's ``def``.
"""

from __future__ import annotations

import ast
import re
import textwrap

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START = re.compile(r"^(def |async def |class |import |from |@)", re.MULTILINE)


def extract_completion(answer: str, prompt: str, entry_point: str) -> str:
    """The completion of ``prompt`` that ``answer`` means (see the module docstring)."""
    code = _code_of(answer, entry_point)
    stripped = code.lstrip("\n")
    if stripped.startswith(prompt.lstrip("\n")):
        return stripped[len(prompt.lstrip("\n")) :]
    if _defines(textwrap.dedent(code), entry_point):
        return "\n" + textwrap.dedent(code)
    return _as_body(code)


def _code_of(answer: str, entry_point: str) -> str:
    """The code in ``answer``: the fenced block that defines ``entry_point``, else the
    first Python block, else the first block; unfenced, the answer from its first line of
    code on when the whole does not parse (prose before the code)."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(answer)]
    if blocks:
        for _, body in blocks:
            if _defines(textwrap.dedent(body), entry_point):
                return body
        python = [body for lang, body in blocks if lang in ("python", "py", "python3")]
        return (python or [blocks[0][1]])[0]
    if _parses(textwrap.dedent(answer)) or not (start := _CODE_START.search(answer)):
        return answer
    return answer[start.start() :]


def _as_body(code: str) -> str:
    """``code`` as the body of the prompt's function: indented four spaces when it is not
    indented already (the prompt ends inside the function, after its docstring)."""
    lines = code.strip("\n").splitlines()
    if lines and all(line.startswith((" ", "\t")) for line in lines if line.strip()):
        return "\n".join(lines) + "\n"
    return textwrap.indent(textwrap.dedent("\n".join(lines)), "    ") + "\n"


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
        for node in tree.body
    )


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True
