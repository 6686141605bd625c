"""Schema 5: bfe_packs' size, saver and last opening, for the byte budget and its eviction order.

``nbytes`` is filled from each stored pack's data, so the budget (a sum of ``nbytes``) counts the
packs saved before it existed. The new NOT NULL columns carry a server default so that existing
rows get a value; the app always writes both.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bfe_packs") as batch:
        batch.add_column(sa.Column("nbytes", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("saver", sa.String(length=64), nullable=False, server_default=""))
        batch.add_column(sa.Column("opened_at", sa.DateTime(), nullable=True))
        batch.create_index("ix_bfe_packs_saver", ["saver"])
    packs = sa.table("bfe_packs", sa.column("nbytes", sa.Integer()), sa.column("data", sa.LargeBinary()))
    op.execute(packs.update().values(nbytes=sa.func.length(packs.c.data)))


def downgrade() -> None:
    with op.batch_alter_table("bfe_packs") as batch:
        batch.drop_index("ix_bfe_packs_saver")
        batch.drop_column("opened_at")
        batch.drop_column("saver")
        batch.drop_column("nbytes")
