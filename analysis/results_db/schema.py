"""The tables of the results database, as SQLAlchemy 2.0 typed mappings.

:class:`Source` (paper, authors, year, arXiv id), :class:`Model` (name, family, parameter count,
link to ``data/catalog.json``), :class:`Task` and its :class:`Metric` (with the metric's valid
range), :class:`Result` (one number with split, single/ensemble, source table, leaderboard snapshot
date and a note), :class:`SavedPack` (a presentation pack saved as a link), :class:`TrainingRun`
(a pre-training run of the lab), a class that follows its teacher (:class:`Classroom`, its :class:`ClassMember`,
:class:`ClassQuestion` and :class:`ClassAnswer`) and :class:`Meta`
(schema and seed-data versions). ``origin`` is ``seed`` for the
published data and ``user`` for what users add.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from analysis.run_status import RunStatus

SCHEMA_VERSION = 7  # 2: bfe_packs (saved presentation packs); 3: bfe_runs (pre-training runs); 4: bfe_verdicts;
# 5: bfe_packs' size, saver and last opening (the byte budget and its eviction order); 6: bfe_runs' lease (the queue
# across replicas); 7: a class (bfe_classes, its members, questions and answers)
RESULT_SPLITS = ("dev", "test", "unspecified")
RESULT_SETTINGS = ("single", "ensemble")


class Base(DeclarativeBase):
    pass


class Meta(Base):
    """Key/value facts about the database itself: ``schema_version``, ``seed_version``."""

    __tablename__ = "bfe_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))


class Source(Base):
    """Where a number comes from: a paper, a blog post or a leaderboard."""

    __tablename__ = "bfe_sources"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(300))
    authors: Mapped[str] = mapped_column(String(500), default="")
    year: Mapped[int | None]
    arxiv: Mapped[str | None] = mapped_column(String(20))
    venue: Mapped[str] = mapped_column(String(200), default="")
    url: Mapped[str] = mapped_column(String(300), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")


class Model(Base):
    """A model (or system) results are reported for; ``catalog_id`` links to ``data/catalog.json``."""

    __tablename__ = "bfe_models"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    family: Mapped[str] = mapped_column(String(40), default="other")
    parameters: Mapped[int | None] = mapped_column(BigInteger)
    catalog_id: Mapped[str | None] = mapped_column(String(100))
    note: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")


class Task(Base):
    """A benchmark task (CoLA, SQuAD 2.0, RACE...) or an aggregate (GLUE's score, ALBERT's Avg)."""

    __tablename__ = "bfe_tasks"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(40), unique=True)
    name: Mapped[str] = mapped_column(String(100))
    benchmark: Mapped[str] = mapped_column(String(20))
    kind: Mapped[str] = mapped_column(String(40), default="")
    description: Mapped[str] = mapped_column(String(300), default="")
    train_size: Mapped[str] = mapped_column(String(20), default="")
    test_size: Mapped[str] = mapped_column(String(20), default="")
    domain: Mapped[str] = mapped_column(String(60), default="")
    metrics: Mapped[str] = mapped_column(String(60), default="")
    source: Mapped[str] = mapped_column(String(200), default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")
    metric_list: Mapped[list[Metric]] = relationship(back_populates="task")


class Metric(Base):
    """A metric of a task with its valid range; ``higher_is_better`` picks the best value in a column."""

    __tablename__ = "bfe_metrics"
    __table_args__ = (UniqueConstraint("task_id", "key", name="uq_metric_task_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("bfe_tasks.id"))
    key: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(80))
    lower: Mapped[float | None] = mapped_column(Float)
    upper: Mapped[float | None] = mapped_column(Float)
    higher_is_better: Mapped[bool] = mapped_column(Boolean, default=True)
    note: Mapped[str] = mapped_column(String(300), default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")
    task: Mapped[Task] = relationship(back_populates="metric_list")


class Result(Base):
    """One reported number. The unique constraint stops the same result being stored twice."""

    __tablename__ = "bfe_results"
    __table_args__ = (
        UniqueConstraint("model_id", "variant", "metric_id", "split", "setting", "source_id", "source_table", name="uq_result"),
        CheckConstraint("split IN ('dev', 'test', 'unspecified')", name="ck_result_split"),
        CheckConstraint("setting IN ('single', 'ensemble')", name="ck_result_setting"),
        CheckConstraint("origin IN ('seed', 'user')", name="ck_result_origin"),
        Index("ix_result_metric_split", "metric_id", "split"),
        Index("ix_result_model", "model_id"),
        Index("ix_result_source", "source_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("bfe_models.id"))
    variant: Mapped[str] = mapped_column(String(200), default="")
    metric_id: Mapped[int] = mapped_column(ForeignKey("bfe_metrics.id"))
    split: Mapped[str] = mapped_column(String(12))
    setting: Mapped[str] = mapped_column(String(10), default="single")
    value: Mapped[float] = mapped_column(Float)
    source_id: Mapped[int] = mapped_column(ForeignKey("bfe_sources.id"))
    source_table: Mapped[str] = mapped_column(String(100), default="")
    slides: Mapped[str] = mapped_column(String(100), default="")
    snapshot: Mapped[dt.date | None] = mapped_column(Date)
    note: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")
    added_at: Mapped[dt.datetime] = mapped_column(DateTime, default=lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None))


class SavedPack(Base):
    """A presentation pack saved as a link: its compressed JSON (:func:`analysis.export.pack_to_bytes`) under a random token."""

    __tablename__ = "bfe_packs"
    token: Mapped[str] = mapped_column(String(32), primary_key=True)
    title: Mapped[str] = mapped_column(String(200), default="")
    items: Mapped[int] = mapped_column(default=0)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, index=True,
                                                    default=lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None))
    nbytes: Mapped[int] = mapped_column(default=0)  # len(data), kept so the budget is a sum, not a scan
    saver: Mapped[str] = mapped_column(String(64), default="", index=True)  # the browser session that saved it
    opened_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)  # last opened by its link


class StoredVerdict(Base):
    """The verdict of one claim of a finished lab preset (:mod:`analysis.verdicts`), with the per-seed scores it was
    decided from and the ids of its runs, so it survives the runs' deletion and says so."""

    __tablename__ = "bfe_verdicts"
    __table_args__ = (UniqueConstraint("run_group", "claim_key", name="uq_verdict_claim"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    group: Mapped[str] = mapped_column("run_group", String(100), index=True)
    preset: Mapped[str] = mapped_column(String(40))
    claim_key: Mapped[str] = mapped_column(String(60))
    label: Mapped[str] = mapped_column(String(40))
    payload: Mapped[str] = mapped_column(Text, default="{}")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, index=True,
                                                    default=lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None))


#: ``bfe_runs.status``'s values (:class:`~analysis.run_status.RunStatus`), in the order a run meets them.
RUN_STATUSES = tuple(status.value for status in RunStatus)


class TrainingRun(Base):
    """A pre-training run (``models.pretrain``): its config, loss curve and evaluation as JSON, and its state.

    ``interrupted``: the process running it died (a server restart); such a run is never shown as finished.
    """

    __tablename__ = "bfe_runs"
    __table_args__ = (CheckConstraint("status IN (" + ", ".join(f"'{v}'" for v in RUN_STATUSES) + ")", name="ck_run_status"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    objective: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(12), default=RunStatus.QUEUED.value)
    config: Mapped[str] = mapped_column(Text, default="{}")
    curve: Mapped[str] = mapped_column(Text, default="[]")
    evaluation: Mapped[str] = mapped_column(Text, default="{}")
    checkpoint: Mapped[str] = mapped_column(String(200), default="")
    message: Mapped[str] = mapped_column(Text, default="")
    group: Mapped[str] = mapped_column("run_group", String(100), default="", index=True)  # an ablation's runs share it
    cancel: Mapped[bool] = mapped_column(default=False)  # asked to stop; the worker sees it within a second
    host: Mapped[str] = mapped_column(String(100), default="")
    pid: Mapped[int | None]
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    seconds: Mapped[float | None] = mapped_column(Float)
    tokens: Mapped[int | None] = mapped_column(BigInteger)
    parameters: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    lease_at: Mapped[dt.datetime | None] = mapped_column(DateTime)  # the worker's last progress write (UTC)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Classroom(Base):
    """A class a teacher leads (:mod:`analysis.results_db.classes`): its join code, the teacher key's hash, when it
    ends, and the page and address the teacher shows (``version`` grows with each change of those or of a question,
    so a follower polls one number)."""

    __tablename__ = "bfe_classes"
    code: Mapped[str] = mapped_column(String(6), primary_key=True)
    teacher: Mapped[str] = mapped_column(String(64))  # sha256 of the teacher key, never the key
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime, index=True)
    page: Mapped[str] = mapped_column(String(64), default="")
    query: Mapped[str] = mapped_column(Text, default="{}")  # the teacher page's URL state, JSON
    version: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)


class ClassMember(Base):
    """A student's browser session in a class: anonymous (a random id), whether it follows, when it was last seen,
    and its answers in the current minute (the rate limit)."""

    __tablename__ = "bfe_class_members"
    code: Mapped[str] = mapped_column(String(6), ForeignKey("bfe_classes.code", ondelete="CASCADE"), primary_key=True)
    member: Mapped[str] = mapped_column(String(32), primary_key=True)
    following: Mapped[bool] = mapped_column(default=True)
    joined_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)
    last_seen: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)
    window_start: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)
    actions: Mapped[int] = mapped_column(default=0)


class ClassQuestion(Base):
    """A question the teacher asked the class about what a page will show (``context``: a digest of the page's
    inputs it is about), its choices (empty: a free word), and the model's answer once revealed."""

    __tablename__ = "bfe_class_questions"
    id: Mapped[int] = mapped_column(primary_key=True)
    code: Mapped[str] = mapped_column(String(6), ForeignKey("bfe_classes.code", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    context: Mapped[str] = mapped_column(String(64))
    prompt: Mapped[str] = mapped_column(String(300))
    choices: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of strings
    status: Mapped[str] = mapped_column(String(10), default="open")  # open | revealed | closed
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)
    revealed_at: Mapped[dt.datetime | None] = mapped_column(DateTime)


class ClassAnswer(Base):
    """One student's answer to one question (editable until the reveal), as plain text."""

    __tablename__ = "bfe_class_answers"
    question_id: Mapped[int] = mapped_column(ForeignKey("bfe_class_questions.id", ondelete="CASCADE"), primary_key=True)
    member: Mapped[str] = mapped_column(String(32), primary_key=True)
    answer: Mapped[str] = mapped_column(String(40))
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=_utcnow)
