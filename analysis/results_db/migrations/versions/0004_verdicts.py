"""Schema 4: bfe_verdicts, the stored verdict of each claim of a finished lab preset.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bfe_verdicts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_group", sa.String(length=100), nullable=False),
        sa.Column("preset", sa.String(length=40), nullable=False),
        sa.Column("claim_key", sa.String(length=60), nullable=False),
        sa.Column("label", sa.String(length=40), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_group", "claim_key", name="uq_verdict_claim"),
    )
    op.create_index("ix_bfe_verdicts_run_group", "bfe_verdicts", ["run_group"])
    op.create_index("ix_bfe_verdicts_created_at", "bfe_verdicts", ["created_at"])


def downgrade() -> None:
    op.drop_table("bfe_verdicts")
