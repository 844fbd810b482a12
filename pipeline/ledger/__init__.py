"""The ledger, the system's record of what it did: its tables, the one write path, read-only access, facts, checks, migrations, locks, backups.
"""
