"""Each side call keeps what it was sent and what it answered.

A draft that failed its checks is not stored as an article, so its parts could not be read afterwards: only
their tokens and latency were (bench, 2026-12-04: an English draft lost to meta-text in its opening, a Chinese one
to a one-paragraph section, and neither could be looked at). Now every capability's model call holds its messages
and its reply, as ``llm`` logs every prompt and response.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_calls") as batch:
        batch.add_column(sa.Column("messages_json", sa.Text(), nullable=True))
        batch.add_column(sa.Column("reply", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_calls") as batch:
        batch.drop_column("reply")
        batch.drop_column("messages_json")
