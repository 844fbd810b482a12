"""Model calls made by capabilities (draft, humanize, topic brainstorm), with tokens and latency.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_calls",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("execution_id", sa.Integer(), nullable=True),
        sa.Column("capability", sa.String(), nullable=False),
        sa.Column("requested_model", sa.String(), nullable=False),
        sa.Column("served_model", sa.String(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("finish_reason", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["execution_id"], ["executions.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("model_calls", schema=None) as batch_op:
        batch_op.create_index("ix_model_calls_execution_id", ["execution_id"], unique=False)
        batch_op.create_index("ix_model_calls_run_id", ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("model_calls", schema=None) as batch_op:
        batch_op.drop_index("ix_model_calls_run_id")
        batch_op.drop_index("ix_model_calls_execution_id")
    op.drop_table("model_calls")
