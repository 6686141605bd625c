"""Schema 1: the published results with their provenance (sources, models, tasks, metrics, results) and bfe_meta.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bfe_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "bfe_sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("authors", sa.String(length=500), nullable=False),
        sa.Column("year", sa.Integer(), nullable=True),
        sa.Column("arxiv", sa.String(length=20), nullable=True),
        sa.Column("venue", sa.String(length=200), nullable=False),
        sa.Column("url", sa.String(length=300), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(length=8), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    op.create_table(
        "bfe_models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("family", sa.String(length=40), nullable=False),
        sa.Column("parameters", sa.BigInteger(), nullable=True),
        sa.Column("catalog_id", sa.String(length=100), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(length=8), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "bfe_tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("benchmark", sa.String(length=20), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("description", sa.String(length=300), nullable=False),
        sa.Column("train_size", sa.String(length=20), nullable=False),
        sa.Column("test_size", sa.String(length=20), nullable=False),
        sa.Column("domain", sa.String(length=60), nullable=False),
        sa.Column("metrics", sa.String(length=60), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("origin", sa.String(length=8), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    op.create_table(
        "bfe_metrics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=20), nullable=False),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("lower", sa.Float(), nullable=True),
        sa.Column("upper", sa.Float(), nullable=True),
        sa.Column("higher_is_better", sa.Boolean(), nullable=False),
        sa.Column("note", sa.String(length=300), nullable=False),
        sa.Column("origin", sa.String(length=8), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["bfe_tasks.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", "key", name="uq_metric_task_key"),
    )
    op.create_table(
        "bfe_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("variant", sa.String(length=200), nullable=False),
        sa.Column("metric_id", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(length=12), nullable=False),
        sa.Column("setting", sa.String(length=10), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("source_table", sa.String(length=100), nullable=False),
        sa.Column("slides", sa.String(length=100), nullable=False),
        sa.Column("snapshot", sa.Date(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(length=8), nullable=False),
        sa.Column("added_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("split IN ('dev', 'test', 'unspecified')", name="ck_result_split"),
        sa.CheckConstraint("setting IN ('single', 'ensemble')", name="ck_result_setting"),
        sa.CheckConstraint("origin IN ('seed', 'user')", name="ck_result_origin"),
        sa.ForeignKeyConstraint(["model_id"], ["bfe_models.id"]),
        sa.ForeignKeyConstraint(["metric_id"], ["bfe_metrics.id"]),
        sa.ForeignKeyConstraint(["source_id"], ["bfe_sources.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("model_id", "variant", "metric_id", "split", "setting", "source_id", "source_table", name="uq_result"),
    )
    op.create_index("ix_result_metric_split", "bfe_results", ["metric_id", "split"])
    op.create_index("ix_result_model", "bfe_results", ["model_id"])
    op.create_index("ix_result_source", "bfe_results", ["source_id"])


def downgrade() -> None:
    for table in ("bfe_results", "bfe_metrics", "bfe_tasks", "bfe_models", "bfe_sources", "bfe_meta"):
        op.drop_table(table)
