"""Conversations: CAMEL role-play, group chat, and the code-and-run pair."""

from ._camel import INSTRUCT as INSTRUCT
from ._camel import SOLVE as SOLVE
from ._camel import TASK_DONE as TASK_DONE
from ._camel import AIAssistant as AIAssistant
from ._camel import AIUser as AIUser
from ._camel import CamelAgent as CamelAgent
from ._camel import GiveInstruction as GiveInstruction
from ._camel import GiveSolution as GiveSolution
from ._camel import RoleFlipError as RoleFlipError
from ._camel import SpecifyTask as SpecifyTask
from ._camel import TaskSpecifier as TaskSpecifier
from ._camel import check_assistant_turn as check_assistant_turn
from ._camel import check_user_turn as check_user_turn
from ._camel import guarded_reply as guarded_reply
from ._camel import says_done as says_done
from ._code_run import CHECK_NAME as CHECK_NAME
from ._code_run import RUN as RUN
from ._code_run import Coder as Coder
from ._code_run import Executor as Executor
from ._code_run import RunScript as RunScript
from ._code_run import Script as Script
from ._code_run import ScriptFailedError as ScriptFailedError
from ._code_run import WriteScript as WriteScript
from ._code_run import report as report
from ._group_chat import ROUND_ROBIN as ROUND_ROBIN
from ._group_chat import SELECT as SELECT
from ._group_chat import SPEAK as SPEAK
from ._group_chat import ChatManager as ChatManager
from ._group_chat import ChatParticipant as ChatParticipant
from ._group_chat import Choice as Choice
from ._group_chat import HandoffReply as HandoffReply
from ._group_chat import NextSpeaker as NextSpeaker
from ._group_chat import Participant as Participant
from ._group_chat import Speak as Speak
from ._group_chat import named as named
from ._group_chat import roster as roster
from ._group_chat import selection_problem as selection_problem
from ._group_chat import transcript as transcript

__all__ = [
    "CHECK_NAME",
    "INSTRUCT",
    "ROUND_ROBIN",
    "RUN",
    "SELECT",
    "SOLVE",
    "SPEAK",
    "TASK_DONE",
    "AIAssistant",
    "AIUser",
    "CamelAgent",
    "ChatManager",
    "ChatParticipant",
    "Choice",
    "Coder",
    "Executor",
    "GiveInstruction",
    "GiveSolution",
    "HandoffReply",
    "NextSpeaker",
    "Participant",
    "RoleFlipError",
    "RunScript",
    "Script",
    "ScriptFailedError",
    "Speak",
    "SpecifyTask",
    "TaskSpecifier",
    "WriteScript",
    "check_assistant_turn",
    "check_user_turn",
    "guarded_reply",
    "named",
    "report",
    "roster",
    "says_done",
    "selection_problem",
    "transcript",
]
