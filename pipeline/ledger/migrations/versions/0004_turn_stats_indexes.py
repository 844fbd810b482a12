"""Partial indexes on assistant turns for ``pipeline stats`` and the metrics.

Per-model counts, tokens and latency percentiles are read from these indexes
alone: scanning ``turns`` itself reads every message's content (kilobytes of
prompts and tool results per row), which made ``stats`` on a 10,000-run
ledger take seconds.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ASSISTANT = "role = 'assistant'"
PROSE = "role = 'assistant' AND tool_calls_json IS NULL"


def upgrade() -> None:
    op.create_index("ix_turns_assistant_stats", "turns",
                    ["requested_model", "latency_ms", "served_model", "prompt_tokens", "completion_tokens", "created_at"],
                    unique=False, sqlite_where=sa.text(ASSISTANT), postgresql_where=sa.text(ASSISTANT))
    op.create_index("ix_turns_prose", "turns", ["requested_model", "served_model", "created_at"],
                    unique=False, sqlite_where=sa.text(PROSE), postgresql_where=sa.text(PROSE))


def downgrade() -> None:
    op.drop_index("ix_turns_prose", table_name="turns")
    op.drop_index("ix_turns_assistant_stats", table_name="turns")
