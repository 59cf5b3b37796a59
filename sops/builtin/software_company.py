"""The software company (MetaGPT's ``Code = SOP(Team)``): an idea becomes a PRD, a system
design, a task list, code written file by file, and tests that QA runs for real.

Every arrow is a watch: the product manager watches the idea (``UserRequirement``), the
architect ``WritePRD``, the project manager ``WriteDesign``, the engineer ``WriteTasks``
(and remembers ``WriteDesign``), QA the engineer's ``SummarizeCode``. QA addresses its
tests, results and bug reports to the engineer, who fixes the files a report names. The
run ends idle once QA's tests pass, or once QA has spent ``max_test_rounds`` fix rounds.
The verdict: QA's last test run passed.

Options (the scenario's ``[sop]`` table)::

    [sop]
    review = true            # WriteCodeReview on every file the engineer writes
    max_review_rounds = 1    # rewrites per file while the review finds issues
    max_test_rounds = 3      # bug reports QA may send before it gives up
    test_timeout_s = 60      # wall clock of one pytest run in the sandbox
    max_files = 8            # files of one task list the engineer writes
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from sopbus.bus import RunRecord, Verdict
from sopbus.roles.company import (
    TEST_REPORT,
    Architect,
    Engineer,
    ProductManager,
    ProjectManager,
    QaEngineer,
)

from .. import _sop
from .._sop import SopContext, Team


class SoftwareCompanyOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``[sop]`` table of a software company scenario (see the module docstring)."""

    review: bool = False
    max_review_rounds: Annotated[int, msgspec.Meta(ge=0, le=10)] = 1
    max_test_rounds: Annotated[int, msgspec.Meta(ge=0, le=20)] = 3
    test_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    test_memory_mb: Annotated[int, msgspec.Meta(ge=64)] = 1024
    max_files: Annotated[int, msgspec.Meta(ge=1, le=50)] = 8


# MetaGPT's names, so runs read like its logs; each role also answers to its job title.
PRODUCT_MANAGER, ARCHITECT, PROJECT_MANAGER, ENGINEER, QA = "Alice", "Bob", "Eve", "Alex", "Edward"


def build(ctx: SopContext) -> Team:
    opts = ctx.options_as(SoftwareCompanyOptions)
    defaults, reg = ctx.llm_defaults, ctx.registry
    engineer = Engineer(
        name=ENGINEER,
        aliases=("Engineer",),
        review=opts.review,
        max_review_rounds=opts.max_review_rounds,
        max_files=opts.max_files,
        llm_defaults=defaults,
        registry=reg,
    )
    qa = QaEngineer(
        name=QA,
        aliases=("QaEngineer", "QA"),
        max_test_rounds=opts.max_test_rounds,
        test_timeout_s=opts.test_timeout_s,
        test_memory_mb=opts.test_memory_mb,
        send_to=(engineer.name,),
        llm_defaults=defaults,
        registry=reg,
    )
    return Team(
        roles=[
            ProductManager(
                name=PRODUCT_MANAGER,
                aliases=("ProductManager",),
                llm_defaults=defaults,
                registry=reg,
            ),
            Architect(name=ARCHITECT, aliases=("Architect",), llm_defaults=defaults, registry=reg),
            ProjectManager(
                name=PROJECT_MANAGER,
                aliases=("ProjectManager",),
                llm_defaults=defaults,
                registry=reg,
            ),
            engineer,
            qa,
        ],
        verdict=qa_passed,
        bounds={QA: f"QA sends at most max_test_rounds = {opts.max_test_rounds} bug reports"},
    )


def qa_passed(record: RunRecord) -> Verdict:
    """The software company's verdict: QA's last test run passed."""
    runs = [m.payload for m in record.of("RunCode") if isinstance(m.payload, dict)]
    if not runs:
        return Verdict(
            passed=False,
            reason=f"QA never ran the tests (the run ended: {record.end_reason}{_detail(record)})",
        )
    last = runs[-1]
    totals = last.get("totals", "")
    if last.get("passed"):
        return Verdict(
            passed=True,
            reason=f"QA's tests passed in test round {last.get('test_round')} ({totals})",
            evidence=TEST_REPORT,
        )
    return Verdict(
        passed=False,
        reason=f"QA's tests failed in test round {last.get('test_round')} "
        f"({totals}); see {TEST_REPORT}",
        evidence=TEST_REPORT,
    )


def _detail(record: RunRecord) -> str:
    return f": {record.detail}" if record.detail else ""


SOP = _sop.SOP(
    name="software_company",
    description="product manager -> architect -> project manager -> engineer -> QA, "
    "with tests run for real and bounded fix rounds",
    build=build,
)
