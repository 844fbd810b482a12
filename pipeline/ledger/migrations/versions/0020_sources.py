"""Articles from sources: the texts a topic is written from, the facts taken from them, the grounding check.

Every article was written from nothing: first-person stories that never happened, numbers nobody measured, no
source and no link (issue 48, on e02c74f). Now a topic comes with its sources (``sources``, each text stored once;
``topic_sources`` numbers them for the article's Sources list), the research step stores the facts it took from
them with their spans (``source_facts``), and each article keeps its grounding check (``grounding_json``: every
statement with a specific, and the span that supports it or "unsupported").

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("location", sa.String(), nullable=False),
        sa.Column("url", sa.String(), nullable=True),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("language", sa.String(), nullable=False),
        sa.Column("sha256", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("location", "sha256"),
    )
    with op.batch_alter_table("sources", schema=None) as batch_op:
        batch_op.create_index("ix_sources_sha256", ["sha256"], unique=False)
    op.create_table(
        "topic_sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("topic_id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"]),
        sa.ForeignKeyConstraint(["topic_id"], ["topics.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("topic_id", "source_id"),
    )
    with op.batch_alter_table("topic_sources", schema=None) as batch_op:
        batch_op.create_index("ix_topic_sources_topic_id", ["topic_id"], unique=False)
    op.create_table(
        "source_facts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("topic_id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"]),
        sa.ForeignKeyConstraint(["topic_id"], ["topics.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("source_facts", schema=None) as batch_op:
        batch_op.create_index("ix_source_facts_run_id", ["run_id"], unique=False)
        batch_op.create_index("ix_source_facts_topic_id", ["topic_id"], unique=False)
    with op.batch_alter_table("articles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("grounding_json", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("articles", schema=None) as batch_op:
        batch_op.drop_column("grounding_json")
    with op.batch_alter_table("source_facts", schema=None) as batch_op:
        batch_op.drop_index("ix_source_facts_topic_id")
        batch_op.drop_index("ix_source_facts_run_id")
    op.drop_table("source_facts")
    with op.batch_alter_table("topic_sources", schema=None) as batch_op:
        batch_op.drop_index("ix_topic_sources_topic_id")
    op.drop_table("topic_sources")
    with op.batch_alter_table("sources", schema=None) as batch_op:
        batch_op.drop_index("ix_sources_sha256")
    op.drop_table("sources")
