"""Books: the blackboard book writer (board, workers, keeper) and the bounded book doctor."""

from ._board import EMPTY as EMPTY
from ._board import INT_SLOTS as INT_SLOTS
from ._board import LIST_SLOTS as LIST_SLOTS
from ._board import PREFIX as PREFIX
from ._board import SEPARATOR as SEPARATOR
from ._board import SLOT_ACTIONS as SLOT_ACTIONS
from ._board import SLOTS as SLOTS
from ._board import TEXT_SLOTS as TEXT_SLOTS
from ._board import Board as Board
from ._board import BoardError as BoardError
from ._board import BoardSlot as BoardSlot
from ._board import BoardView as BoardView
from ._board import Heading as Heading
from ._board import Write as Write
from ._board import child_key as child_key
from ._board import coerce as coerce
from ._board import read_write as read_write
from ._board import slot_action as slot_action
from ._board import slot_of as slot_of
from ._board import write_message as write_message
from ._data import THIN_ROUTE_WORDS as THIN_ROUTE_WORDS
from ._data import Adjustment as Adjustment
from ._data import BookData as BookData
from ._data import Chapter as Chapter
from ._data import ChapterMemory as ChapterMemory
from ._data import Fact as Fact
from ._data import load_book as load_book
from ._doctor import CHAR_RANGE as CHAR_RANGE
from ._doctor import CUT as CUT
from ._doctor import MAX_ANSWER_KEPT as MAX_ANSWER_KEPT
from ._doctor import MAX_QUESTION_CHARS as MAX_QUESTION_CHARS
from ._doctor import STEP_RANGE as STEP_RANGE
from ._doctor import TOOL_RANGE as TOOL_RANGE
from ._doctor import BookDoctor as BookDoctor
from ._doctor import DoctorBounds as DoctorBounds
from ._doctor import ProposePlan as ProposePlan
from ._doctor import cut_text as cut_text
from ._doctor import parse as parse
from ._doctor import request_chars as request_chars
from ._notes import Note as Note
from ._notes import Policy as Policy
from ._notes import load_notes as load_notes
from ._notes import load_policies as load_policies
from ._notes import matching_notes as matching_notes
from ._notes import policies_for as policies_for
from ._notes import policy_text as policy_text
from ._plan import ChapterChange as ChapterChange
from ._plan import Decision as Decision
from ._plan import NewChapter as NewChapter
from ._plan import Plan as Plan
from ._plan import Suggestion as Suggestion
from ._plan import decision_problem as decision_problem
from ._plan import plan_document as plan_document
from ._plan import plan_markdown as plan_markdown
from ._plan import validate_plan as validate_plan
from ._render import BoardKeeper as BoardKeeper
from ._render import render_book as render_book
from ._render import title_of as title_of
from ._tools import MAX_CARDS as MAX_CARDS
from ._tools import TOOLS as TOOLS
from ._tools import Tool as Tool
from ._tools import ToolArgs as ToolArgs
from ._tools import ToolError as ToolError
from ._tools import call_tool as call_tool
from ._tools import chapter_cards as chapter_cards
from ._tools import chapter_summary as chapter_summary
from ._tools import recent_adjustments as recent_adjustments
from ._tools import route_summary as route_summary
from ._tools import search_facts as search_facts
from ._tools import search_memories as search_memories
from ._tools import tool_list as tool_list
from ._workers import WORKERS as WORKERS
from ._workers import BoardWorker as BoardWorker
from ._workers import ContentWorker as ContentWorker
from ._workers import Draft as Draft
from ._workers import Evaluation as Evaluation
from ._workers import EvaluationWorker as EvaluationWorker
from ._workers import GatheredMaterial as GatheredMaterial
from ._workers import MaterialNeeds as MaterialNeeds
from ._workers import MaterialWorker as MaterialWorker
from ._workers import RevisionWorker as RevisionWorker
from ._workers import Section as Section
from ._workers import SplitPlan as SplitPlan
from ._workers import SplitWorker as SplitWorker
from ._workers import Strategy as Strategy
from ._workers import StrategyWorker as StrategyWorker
from ._workers import WriterSettings as WriterSettings
from ._workers import word_count as word_count

__all__ = [
    "CHAR_RANGE",
    "CUT",
    "EMPTY",
    "INT_SLOTS",
    "LIST_SLOTS",
    "MAX_ANSWER_KEPT",
    "MAX_CARDS",
    "MAX_QUESTION_CHARS",
    "PREFIX",
    "SEPARATOR",
    "SLOTS",
    "SLOT_ACTIONS",
    "STEP_RANGE",
    "TEXT_SLOTS",
    "THIN_ROUTE_WORDS",
    "TOOLS",
    "TOOL_RANGE",
    "WORKERS",
    "Adjustment",
    "Board",
    "BoardError",
    "BoardKeeper",
    "BoardSlot",
    "BoardView",
    "BoardWorker",
    "BookData",
    "BookDoctor",
    "Chapter",
    "ChapterChange",
    "ChapterMemory",
    "ContentWorker",
    "Decision",
    "DoctorBounds",
    "Draft",
    "Evaluation",
    "EvaluationWorker",
    "Fact",
    "GatheredMaterial",
    "Heading",
    "MaterialNeeds",
    "MaterialWorker",
    "NewChapter",
    "Note",
    "Plan",
    "Policy",
    "ProposePlan",
    "RevisionWorker",
    "Section",
    "SplitPlan",
    "SplitWorker",
    "Strategy",
    "StrategyWorker",
    "Suggestion",
    "Tool",
    "ToolArgs",
    "ToolError",
    "Write",
    "WriterSettings",
    "call_tool",
    "chapter_cards",
    "chapter_summary",
    "child_key",
    "coerce",
    "cut_text",
    "decision_problem",
    "load_book",
    "load_notes",
    "load_policies",
    "matching_notes",
    "parse",
    "plan_document",
    "plan_markdown",
    "policies_for",
    "policy_text",
    "read_write",
    "recent_adjustments",
    "render_book",
    "request_chars",
    "route_summary",
    "search_facts",
    "search_memories",
    "slot_action",
    "slot_of",
    "title_of",
    "tool_list",
    "validate_plan",
    "word_count",
    "write_message",
]
