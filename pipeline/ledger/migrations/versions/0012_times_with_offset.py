"""Times carry their offset on SQLite too: ISO 8601 text ending in ``+00:00``.

The columns were always ``DateTime(timezone=True)``: ``timestamptz`` on PostgreSQL, where
nothing changes. SQLite has no time type, and SQLAlchemy wrote ``2026-11-30 17:54:25.123456``,
which datasette and the sqlite3 shell show as a local-looking time. This rewrites every stored
time as ``2026-11-30T17:54:25.123456+00:00``, the text ``pipeline.ledger.models.UTCDateTime`` writes
from now on (one width, so text order stays time order). Downgrade writes the old text back.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30
"""
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TIMES = {
    "runs": ("started_at", "finished_at"),
    "turns": ("created_at",),
    "executions": ("started_at", "finished_at"),
    "topics": ("created_at",),
    "articles": ("created_at",),
    "publications": ("created_at", "verified_at", "submit_started_at", "submitted_at"),
    "registrations": ("created_at",),
    "reports": ("created_at",),
    "claims": ("created_at",),
    "guard_events": ("created_at",),
    "ticks": ("scheduled_for", "claimed_at", "finished_at"),
    "platform_tokens": ("expires_at", "fetched_at"),
    "reviews": ("requested_at", "decided_at", "completed_at"),
}


def _rewrite(expression: str) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, columns in TIMES.items():
        for column in columns:
            op.execute(f"UPDATE {table} SET {column} = {expression.format(c=column)} WHERE {column} IS NOT NULL")


def upgrade() -> None:
    # 'YYYY-MM-DD HH:MM:SS[.ffffff]' (or a bare date) -> 'YYYY-MM-DDTHH:MM:SS.ffffff+00:00'
    _rewrite("CASE WHEN {c} LIKE '%+00:00' THEN {c} "
             "WHEN length({c}) = 10 THEN {c} || 'T00:00:00.000000+00:00' "
             "ELSE substr({c}, 1, 10) || 'T' || substr({c}, 12, 8) || '.' "
             "|| substr(substr({c}, 21) || '000000', 1, 6) || '+00:00' END")


def downgrade() -> None:
    _rewrite("CASE WHEN {c} LIKE '%+00:00' THEN substr({c}, 1, 10) || ' ' || substr({c}, 12, 15) ELSE {c} END")
