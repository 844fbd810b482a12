"""Probed provider capabilities, and the model turns a run spent after its work was done.

``provider_capabilities``: per model and api_base, whether the endpoint honours
``response_format`` json_schema, native tools and usage (``pipeline.model.probe``).
``runs.turns_after_done``: assistant turns after done_when held and the report was
recorded (the agent allows one closing message; ``pipeline stats`` shows it).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provider_capabilities",
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("api_base", sa.String(), nullable=False),
        sa.Column("json_schema", sa.Boolean(), nullable=True),
        sa.Column("tools", sa.Boolean(), nullable=True),
        sa.Column("usage", sa.Boolean(), nullable=True),
        sa.Column("served_model", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("probed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model", "api_base"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("turns_after_done", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("turns_after_done")
    op.drop_table("provider_capabilities")
