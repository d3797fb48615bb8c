"""The store's parts, split by what each keeps; `burst.state.Store` composes them into the one store callers use.

`base` opens, migrates, backs up and closes the store and runs its
transactions; `schema` holds the versioned migrations; `sql` the helpers the
parts share (times, JSON, windows). Each other module is one mixin over its
tables: `jobs`, `nodes` (nodes as last observed, the actuator's intent journal,
group targets), `ledger` (costs and job losses), `demand` (demand history),
`decisions` (the decision log), `service_events` (events declared through the
API), `meta` (the key/value table, the controller's
memory, job run times, API token hashes) and `retention` (what is pruned
across tables). Import the store from `burst.state`, not from here.
"""
