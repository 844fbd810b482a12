"""ticks: one row per scheduled firing of a channel.

Claimed under UNIQUE(channel, scheduled_for) before the run starts, so a duplicated or
redelivered task, or two schedulers firing the same tick, end in one completed run.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 09:40:25.902218
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('ticks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('channel', sa.String(), nullable=False),
    sa.Column('scheduled_for', sa.DateTime(timezone=True), nullable=False),
    sa.Column('state', sa.String(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(), nullable=True),
    sa.Column('claimed_by', sa.String(), nullable=True),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('channel', 'scheduled_for')
    )
    with op.batch_alter_table('ticks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ticks_run_id'), ['run_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('ticks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ticks_run_id'))

    op.drop_table('ticks')
