"""Schema 6: bfe_runs' lease, a running run's last progress write (the queue shared by replicas).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bfe_runs") as batch:
        batch.add_column(sa.Column("lease_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bfe_runs") as batch:
        batch.drop_column("lease_at")
