"""Schema 7: a class that follows its teacher: bfe_classes, bfe_class_members, bfe_class_questions, bfe_class_answers.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bfe_classes",
        sa.Column("code", sa.String(length=6), nullable=False),
        sa.Column("teacher", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("page", sa.String(length=64), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("code"),
    )
    op.create_index("ix_bfe_classes_expires_at", "bfe_classes", ["expires_at"])
    op.create_table(
        "bfe_class_members",
        sa.Column("code", sa.String(length=6), nullable=False),
        sa.Column("member", sa.String(length=32), nullable=False),
        sa.Column("following", sa.Boolean(), nullable=False),
        sa.Column("joined_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen", sa.DateTime(), nullable=False),
        sa.Column("window_start", sa.DateTime(), nullable=False),
        sa.Column("actions", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["code"], ["bfe_classes.code"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("code", "member"),
    )
    op.create_table(
        "bfe_class_questions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=6), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("context", sa.String(length=64), nullable=False),
        sa.Column("prompt", sa.String(length=300), nullable=False),
        sa.Column("choices", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revealed_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["code"], ["bfe_classes.code"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_bfe_class_questions_code", "bfe_class_questions", ["code"])
    op.create_table(
        "bfe_class_answers",
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("member", sa.String(length=32), nullable=False),
        sa.Column("answer", sa.String(length=40), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["question_id"], ["bfe_class_questions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("question_id", "member"),
    )


def downgrade() -> None:
    op.drop_table("bfe_class_answers")
    op.drop_table("bfe_class_questions")
    op.drop_table("bfe_class_members")
    op.drop_index("ix_bfe_classes_expires_at", table_name="bfe_classes")
    op.drop_table("bfe_classes")
