"""Who schedules and who runs: the daemon, the Celery engine, ticks, the resident model and ledger, the topology.
"""
