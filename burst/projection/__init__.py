"""Dry-run cost projections (`burst cost`) and metering (`burst usage`).

A projection fits the demand forecast on a history, turns demand paths
sampled from it into synthetic job arrivals (`arrivals`), replays them
through the simulator with the real planner (`burst.sim`; each path's run in
a worker process: `runs`), and reports cost per tenant and per cost line,
queue waits, budget status (`budget`), what-ifs (`whatif`) and capacity
advice (`capacity`). `usage` meters the store's cost ledger.
"""
