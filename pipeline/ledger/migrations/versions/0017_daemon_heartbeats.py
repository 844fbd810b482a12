"""daemons: each `pipeline daemon`'s start, heartbeat and clean stop, for `pipeline status`.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("daemons",
                    sa.Column("id", sa.String(), nullable=False),
                    sa.Column("host", sa.String(), nullable=False),
                    sa.Column("pid", sa.Integer(), nullable=False),
                    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
                    sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
                    sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
                    sa.PrimaryKeyConstraint("id"))
    with op.batch_alter_table("daemons", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_daemons_started_at"), ["started_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("daemons", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_daemons_started_at"))
    op.drop_table("daemons")
