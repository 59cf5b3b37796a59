"""The names of the files in a run directory, in one place (no imports: the CLI's light
modules read them too)."""

EVENTS = "events.jsonl"
COSTS = "costs.jsonl"
SUMMARY = "summary.json"
SCENARIO = "scenario.toml"
ARTIFACTS = "artifacts"
CALLS = "calls.jsonl"  # the run's LLM answers (resume, replay, fork)
RECEIPTS = "receipts.jsonl"  # under artifacts/, written by gated SOPs
SANDBOX_SCRATCH = ".sandbox"  # scratch directories of sandboxed runs; removed as they end
