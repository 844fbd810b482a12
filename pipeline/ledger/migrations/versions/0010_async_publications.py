"""Asynchronous publishing (WeChat): per-step ids on publications, and shared platform tokens.

A WeChat publication goes through several platform calls (cover, draft, submit,
poll); each one's result is written down as soon as it comes back so that a
crash resumes after the last step instead of repeating it. ``submit_started_at``
marks the window in which a publish task may exist without its ``publish_id``.
``platform_tokens`` holds the access token every process and worker shares.

Revision ID: 0010
Revises: 0004
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("publications", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cover_id", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("draft_id", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("submit_started_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("publish_id", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "platform_tokens",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("platform_tokens")
    with op.batch_alter_table("publications", schema=None) as batch_op:
        for name in ("submitted_at", "publish_id", "submit_started_at", "draft_id", "cover_id"):
            batch_op.drop_column(name)
