"""Each article's score says which scorer measured it, and holds every paragraph's score.

Scores from the token-probability scorer (issue 21) and the stylometric heuristic before it are not
comparable: ``scorer`` (method version and model sha256) keeps them apart; NULL is the heuristic.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("articles") as batch:
        batch.add_column(sa.Column("scorer", sa.String(), nullable=True))
        batch.add_column(sa.Column("score_paragraphs_json", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("articles") as batch:
        batch.drop_column("score_paragraphs_json")
        batch.drop_column("scorer")
