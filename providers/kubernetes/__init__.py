"""Kubernetes: the cluster cache and writes, node handling, checkpoint-then-evict, and the Lease leader election.

The official `kubernetes` client is imported only in this package (and only
when a config uses Kubernetes); `burst.workloads.kubernetes` turns its pods
into jobs.
"""
