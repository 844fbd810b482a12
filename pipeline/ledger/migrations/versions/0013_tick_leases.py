"""ticks carry a lease, a queued state and their outcome; tick_events record every delivery.

A claim is held while its run renews ``lease_until``; a lapsed lease with the channel lock free
means the claimer died, and the tick is queued again (not at the broker's visibility timeout).
The daemon writes a ``queued`` row before sending a tick, so every tick it queued has a row.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ticks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("outcome", sa.Text(), nullable=True))
    op.create_table(
        "tick_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tick_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.ForeignKeyConstraint(["tick_id"], ["ticks.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tick_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tick_events_tick_id"), ["tick_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tick_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tick_events_tick_id"))
    op.drop_table("tick_events")
    with op.batch_alter_table("ticks", schema=None) as batch_op:
        batch_op.drop_column("outcome")
        batch_op.drop_column("queued_at")
        batch_op.drop_column("lease_until")
