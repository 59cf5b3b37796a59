"""The gated writer: evidence planner, writer, detector gate and publisher."""

from ._detect import CHECK_SCRIPT as CHECK_SCRIPT
from ._detect import MODEL_CHECK as MODEL_CHECK
from ._detect import Finding as Finding
from ._detect import GateOptions as GateOptions
from ._detect import GateReport as GateReport
from ._detect import Issue as Issue
from ._detect import ModelFindings as ModelFindings
from ._detect import detect as detect
from ._detect import validate_report as validate_report
from ._guard import CAUSES as CAUSES
from ._guard import FAILED_EVENT as FAILED_EVENT
from ._guard import Closed as Closed
from ._guard import SampleFailed as SampleFailed
from ._guard import ask_strict as ask_strict
from ._guard import fail_closed as fail_closed
from ._guard import same_model as same_model
from ._store import Contract as Contract
from ._store import Item as Item
from ._store import Manifest as Manifest
from ._store import Outline as Outline
from ._store import Point as Point
from ._store import Selected as Selected
from ._store import Store as Store
from ._store import extend as extend
from ._store import load_outline as load_outline
from ._store import load_store as load_store
from ._store import manifest_bytes as manifest_bytes
from ._store import plan as plan
from ._store import terms as terms
from ._writer import CHECK as CHECK
from ._writer import DELIVER as DELIVER
from ._writer import DRAFT as DRAFT
from ._writer import OUTLINE as OUTLINE
from ._writer import PLAN as PLAN
from ._writer import USER as USER
from ._writer import ChapterGate as ChapterGate
from ._writer import ChapterPublisher as ChapterPublisher
from ._writer import ChapterWriter as ChapterWriter
from ._writer import ConfirmOutline as ConfirmOutline
from ._writer import DeliverChapter as DeliverChapter
from ._writer import EvidencePlanner as EvidencePlanner
from ._writer import EvidenceRequest as EvidenceRequest
from ._writer import GateChapter as GateChapter
from ._writer import GatedSettings as GatedSettings
from ._writer import PerMessage as PerMessage
from ._writer import PlanEvidence as PlanEvidence
from ._writer import WriteChapter as WriteChapter
from ._writer import WriterAnswer as WriterAnswer

__all__ = [
    "CAUSES",
    "CHECK",
    "CHECK_SCRIPT",
    "DELIVER",
    "DRAFT",
    "FAILED_EVENT",
    "MODEL_CHECK",
    "OUTLINE",
    "PLAN",
    "USER",
    "ChapterGate",
    "ChapterPublisher",
    "ChapterWriter",
    "Closed",
    "ConfirmOutline",
    "Contract",
    "DeliverChapter",
    "EvidencePlanner",
    "EvidenceRequest",
    "Finding",
    "GateChapter",
    "GateOptions",
    "GateReport",
    "GatedSettings",
    "Issue",
    "Item",
    "Manifest",
    "ModelFindings",
    "Outline",
    "PerMessage",
    "PlanEvidence",
    "Point",
    "SampleFailed",
    "Selected",
    "Store",
    "WriteChapter",
    "WriterAnswer",
    "ask_strict",
    "detect",
    "extend",
    "fail_closed",
    "load_outline",
    "load_store",
    "manifest_bytes",
    "plan",
    "same_model",
    "terms",
    "validate_report",
]
