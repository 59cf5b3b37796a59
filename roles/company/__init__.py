"""The software company: product manager, architect, project manager, engineer and QA;
and the team of one function from its specification (the HumanEval SOPs)."""

from ._code import BUG_REPORT as BUG_REPORT
from ._code import CodeFile as CodeFile
from ._code import CodeReview as CodeReview
from ._code import CodeSummary as CodeSummary
from ._code import Engineer as Engineer
from ._code import FileSummary as FileSummary
from ._code import SummarizeCode as SummarizeCode
from ._code import WriteCode as WriteCode
from ._code import WriteCodeReview as WriteCodeReview
from ._docs import PRD as PRD
from ._docs import Architect as Architect
from ._docs import DocumentAction as DocumentAction
from ._docs import FileLogic as FileLogic
from ._docs import ProductManager as ProductManager
from ._docs import ProjectManager as ProjectManager
from ._docs import Requirement as Requirement
from ._docs import SystemDesign as SystemDesign
from ._docs import TaskList as TaskList
from ._docs import WriteDesign as WriteDesign
from ._docs import WritePRD as WritePRD
from ._docs import WriteTasks as WriteTasks
from ._function import SOLUTION as SOLUTION
from ._function import FunctionEngineer as FunctionEngineer
from ._function import FunctionReviewer as FunctionReviewer
from ._function import FunctionTester as FunctionTester
from ._function import ReviewFunction as ReviewFunction
from ._function import ReviseFunction as ReviseFunction
from ._function import SubmitFunction as SubmitFunction
from ._function import WriteFunction as WriteFunction
from ._function import WriteFunctionTests as WriteFunctionTests
from ._function import complete as complete
from ._function import entry_point as entry_point
from ._qa import TEST_REPORT as TEST_REPORT
from ._qa import BugReport as BugReport
from ._qa import DebugError as DebugError
from ._qa import PytestFile as PytestFile
from ._qa import QaEngineer as QaEngineer
from ._qa import WriteTest as WriteTest
from ._qa import render_test_report as render_test_report
from ._testrun import PYTEST as PYTEST
from ._testrun import PYTEST_ENV as PYTEST_ENV
from ._testrun import PytestRun as PytestRun
from ._testrun import RunCode as RunCode
from ._util import WORKSPACE as WORKSPACE
from ._util import concurrently as concurrently
from ._util import is_test as is_test
from ._util import listing as listing
from ._util import safe_path as safe_path
from ._util import tail as tail
from ._util import task_prompt as task_prompt
from ._util import unique_paths as unique_paths

__all__ = [
    "BUG_REPORT",
    "PRD",
    "PYTEST",
    "PYTEST_ENV",
    "SOLUTION",
    "TEST_REPORT",
    "WORKSPACE",
    "Architect",
    "BugReport",
    "CodeFile",
    "CodeReview",
    "CodeSummary",
    "DebugError",
    "DocumentAction",
    "Engineer",
    "FileLogic",
    "FileSummary",
    "FunctionEngineer",
    "FunctionReviewer",
    "FunctionTester",
    "ProductManager",
    "ProjectManager",
    "PytestFile",
    "PytestRun",
    "QaEngineer",
    "Requirement",
    "ReviewFunction",
    "ReviseFunction",
    "RunCode",
    "SubmitFunction",
    "SummarizeCode",
    "SystemDesign",
    "TaskList",
    "WriteCode",
    "WriteCodeReview",
    "WriteDesign",
    "WriteFunction",
    "WriteFunctionTests",
    "WritePRD",
    "WriteTasks",
    "WriteTest",
    "complete",
    "concurrently",
    "entry_point",
    "is_test",
    "listing",
    "render_test_report",
    "safe_path",
    "tail",
    "task_prompt",
    "unique_paths",
]
