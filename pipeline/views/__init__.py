"""Read models built from the ledger alone: status, stats, reports, the claimed-versus-done diff and the Prometheus metrics.
"""
