"""Money: prices (per-scenario overrides, ``prices.toml``, then genai-prices), the budget with its
reservations, the shared account a sweep's runs draw on, the cost ledger's line, and cost
reports read back from a ledger. All amounts are ``Decimal`` USD.
"""

from ._account import AccountShare as AccountShare
from ._account import AccountState as AccountState
from ._account import Hold as Hold
from ._account import SharedAccount as SharedAccount
from ._book import Book as Book
from ._book import checked_cap as checked_cap
from ._book import decoder as decoder
from ._book import encoder as encoder
from ._book import new_hold as new_hold
from ._budget import Budget as Budget
from ._budget import Reservation as Reservation
from ._costs import cost_report as cost_report
from ._costs import ledger_csv as ledger_csv
from ._costs import load_ledger as load_ledger
from ._costs import render_table as render_table
from ._costs import report_json as report_json
from ._costs import reprice as reprice
from ._file_account import FileAccount as FileAccount
from ._format import money as money
from ._format import share as share
from ._format import usd as usd
from ._ledger import TOOL_PROVIDER as TOOL_PROVIDER
from ._ledger import WALL_CLOCK_FIELDS as WALL_CLOCK_FIELDS
from ._ledger import CallColumns as CallColumns
from ._ledger import LedgerLine as LedgerLine
from ._ledger import Outcome as Outcome
from ._ledger import without_wall_clock as without_wall_clock
from ._library import known_names as known_names
from ._library import version as version
from ._prices import PACKAGED as PACKAGED
from ._prices import PriceBook as PriceBook
from ._quote import Price as Price
from ._quote import PriceSource as PriceSource
from ._quote import Quote as Quote
from ._quote import Tier as Tier

__all__ = [
    "PACKAGED",
    "TOOL_PROVIDER",
    "WALL_CLOCK_FIELDS",
    "AccountShare",
    "AccountState",
    "Book",
    "Budget",
    "CallColumns",
    "FileAccount",
    "Hold",
    "LedgerLine",
    "Outcome",
    "Price",
    "PriceBook",
    "PriceSource",
    "Quote",
    "Reservation",
    "SharedAccount",
    "Tier",
    "checked_cap",
    "cost_report",
    "decoder",
    "encoder",
    "known_names",
    "ledger_csv",
    "load_ledger",
    "money",
    "new_hold",
    "render_table",
    "report_json",
    "reprice",
    "share",
    "usd",
    "version",
    "without_wall_clock",
]
