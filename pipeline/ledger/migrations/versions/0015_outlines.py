"""Plan, then write: the draft's outline, and what was checked and measured with each article.

``outlines`` holds the draft step's plan (title, thesis, sections with their points). Articles
gain ``outline_id`` (the plan a draft was written from), ``checks_json`` (the completeness
checks, pipeline.text.article) and ``paragraphs_json`` (humanize: each rewritten paragraph's score
before and after, and why a rewrite was rejected).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outlines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("topic_id", sa.Integer(), nullable=True),
        sa.Column("language", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("thesis", sa.Text(), nullable=False),
        sa.Column("sections_json", sa.Text(), nullable=False),
        sa.Column("constrained", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.ForeignKeyConstraint(["topic_id"], ["topics.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("outlines", schema=None) as batch_op:
        batch_op.create_index("ix_outlines_run_id", ["run_id"], unique=False)
    with op.batch_alter_table("articles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("outline_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("checks_json", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("paragraphs_json", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("articles", schema=None) as batch_op:
        batch_op.drop_column("paragraphs_json")
        batch_op.drop_column("checks_json")
        batch_op.drop_column("outline_id")
    with op.batch_alter_table("outlines", schema=None) as batch_op:
        batch_op.drop_index("ix_outlines_run_id")
    op.drop_table("outlines")
