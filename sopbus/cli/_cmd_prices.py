"""``sopbus prices [MODEL] [--scenario FILE] [--base-url URL] [--json]``: what a model
costs, and why.

With ``MODEL``: its USD per 1M input, output and cached input tokens (and the tiers for
long prompts), the source that priced it (the scenario's ``[prices]``, sopbus's
``bus/money/prices.toml`` or genai-prices) and, from genai-prices, the model and provider it
matched and how. A model no source knows exits 2 with close names and the fix, as
``sopbus run`` would. Without ``MODEL``: the models of ``prices.toml`` (and of the
scenario), and how many more genai-prices knows.

``--scenario`` adds the file's ``[prices]`` and its endpoint; ``--base-url`` names the
endpoint (genai-prices then prefers the provider that serves it: ``api.groq.com`` is Groq).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._args import path_arg
from ._flags import BASE_URL, JSON, Flag, add

if TYPE_CHECKING:
    from sopbus.bus.money import PriceBook, Quote

NAME = "prices"
HELP = "what a model costs per 1M input/output/cached tokens, and which source says so"


MODEL_NAME = Flag(
    "model",
    metavar="MODEL",
    nargs="?",
    help="a model name (without it: the models sopbus ships prices for)",
)
PRICED_BY = Flag(
    "--scenario",
    metavar="FILE",
    type=path_arg,
    help="a scenario whose [prices] and endpoint count first",
)


def configure(parser: argparse.ArgumentParser) -> None:
    endpoint = BASE_URL.but(help="the endpoint the model is called at (picks the provider's price)")
    add(parser, MODEL_NAME, PRICED_BY, endpoint, JSON.but(help="print JSON instead of text"))


def run(args: argparse.Namespace) -> int:
    import msgspec

    book = _book(args)
    if args.model is None:
        quotes = [book.quote(model) for model in book.models]
        if args.json:
            print(msgspec.json.encode(quotes).decode())
        else:
            _print_list(quotes)
        return 0
    quote = book.quote(args.model)
    if args.json:
        print(msgspec.json.encode(_with_version(quote)).decode())
    else:
        from ._runref import console

        print("\n".join(describe(quote, console().width)))
    return 0


def _book(args: argparse.Namespace) -> PriceBook:
    from sopbus.bus.money import PriceBook

    overrides: dict[str, Any] = {}
    endpoint = args.base_url
    if args.scenario is not None:
        from sopbus._assemble import endpoint as run_endpoint
        from sopbus._assemble import run_environ
        from sopbus._examples import scenario_path
        from sopbus.bus import load_scenario

        scenario = load_scenario(scenario_path(args.scenario))
        overrides = scenario.price_table()
        endpoint = endpoint or run_endpoint(scenario, run_environ())
    return PriceBook.load(overrides, endpoint=endpoint)


def describe(quote: Quote, columns: int) -> list[str]:
    """``quote`` for people: the rates, then where they come from, wrapped at ``columns``."""
    from sopbus.bus.money import usd

    from ._fit import hanging

    price = quote.price
    rows = [
        ("", "input", "output", "cached input"),
        ("base", usd(price.input), usd(price.output), usd(price.cached_input)),
    ]
    rows += [
        (f"prompt > {t.above:,}", usd(t.input), usd(t.output), usd(t.cached_input))
        for t in price.tiers
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{quote.model}: USD per 1M tokens"]
    lines += ["  " + r[0].ljust(width) + "".join(c.rjust(14) for c in r[1:]) for r in rows]
    if price.tiers:
        lines.append("  (a tier bills the whole call once its prompt has more tokens)")
    if price.cache_write is not None:
        tiers = "".join(
            f"; prompt > {t.above:,}: {usd(price.write_rate(t.above + 1))}" for t in price.tiers
        )
        lines.append(
            f"  cache write: {usd(price.cache_write)}{tiers} (prompt tokens written to the cache)"
        )
    lines.append(hanging("source:  ", _source(quote), columns))
    if quote.source == "genai-prices":
        name = f" ({quote.matched_name})" if quote.matched_name else ""
        lines.append(
            hanging(
                "matched: ",
                f"{quote.matched}{name} of {quote.provider_name} [{quote.provider}], "
                f"because {quote.how}",
                columns,
            )
        )
        if quote.also:
            also = f"{', '.join(quote.also)} (pick one with --base-url)"
            lines.append(hanging("also listed by: ", also, columns))
    lines += [hanging("note:    ", note, columns) for note in quote.notes]
    return lines


def _source(quote: Quote) -> str:
    from sopbus.bus.money import PACKAGED, version

    if quote.source == "command-line":
        return "the command line: --price (it comes first, over the scenario's [prices])"
    if quote.source == "scenario":
        return f'scenario: its [prices."{quote.model}"] table (it comes first)'
    if quote.source == "sopbus":
        return f"sopbus: {PACKAGED}, shipped with the package (no [prices] entry in the scenario)"
    return (
        f"genai-prices {version()} (offline data; not in the scenario's [prices] nor in {PACKAGED})"
    )


def _with_version(quote: Quote) -> dict[str, Any]:
    import msgspec

    from sopbus.bus.money import version

    record: dict[str, Any] = msgspec.to_builtins(quote)
    if quote.source == "genai-prices":
        record["library_version"] = version()
    return record


def _print_list(quotes: list[Quote]) -> None:
    from sopbus.bus.money import known_names, usd, version

    width = max([len("model"), *(len(q.model) for q in quotes)])
    print(f"{'model'.ljust(width)}  {'input':>10}{'output':>10}{'cached':>10}  source")
    for q in quotes:
        p = q.price
        print(
            f"{q.model.ljust(width)}  {usd(p.input):>10}{usd(p.output):>10}"
            f"{usd(p.cached_input):>10}  {q.source}"
        )
    from ._fit import hanging
    from ._runref import console

    footer = (
        f"(USD per 1M tokens) Behind these, genai-prices {version()} knows "
        f"{len(known_names()):,} models offline; `sopbus prices MODEL` shows one and why."
    )
    print(hanging("", footer, console().width))
