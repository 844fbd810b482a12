"""The platform's own id for each publication; runs indexed by channel and start.

``remote_id`` (the WordPress/Ghost post id, the webhook receiver's id) lets a later
step address the post it created instead of searching for it again. The index serves
the per-channel questions asked at every run and by ``status``: the channel's last
run, its runs left ``running``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("publications", schema=None) as batch_op:
        batch_op.add_column(sa.Column("remote_id", sa.String(), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_channel_started_at", ["channel", "started_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_channel_started_at")
    with op.batch_alter_table("publications", schema=None) as batch_op:
        batch_op.drop_column("remote_id")
