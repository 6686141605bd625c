"""The results database: published GLUE/SQuAD/RACE results with provenance, in SQL through SQLAlchemy 2.0.

Usage::

    from analysis import results_db as db
    df = db.results_frame(models=["BERT-large"], splits=["dev"])       # pandas, one row per number
    db.add_result(db.NewResult(model="My BERT", task="RTE", metric="acc", split="dev", value=71.5,
                               source="Doe et al. 2026, course project"))  # validated; a duplicate is refused
    db.import_csv(raw_bytes)                                           # all rows or none; errors by line

One job per module:

- :mod:`.schema`: the tables (typed ORM mappings) and the schema version;
- :mod:`.engine`: one engine per ``DATABASE_URL``, SQLite's settings, read sessions and retried writes;
- :mod:`.migrate`: the schema's Alembic migrations, run by seeding (a fresh or older database is brought to the current schema);
- :mod:`.seeding`: loading ``data/results/`` on first start and on each new version, safely from many processes;
- :mod:`.validation`: checking a user's result (names, ranges, sources);
- :mod:`.writes`: adding, importing and deleting, safe under concurrent processes;
- :mod:`.csvio`: the import/export CSV format, bounded in and formula-safe out;
- :mod:`.packs`: presentation packs saved as links;
- :mod:`.runs`: the pre-training lab's runs (config, curve, evaluation, state);
- :mod:`.classes`: a class that follows its teacher (its code, the teacher's page, questions and answers);
- :mod:`.queries`: results joined with their provenance, and the reference tables.

No torch and no streamlit here.
"""

from analysis.results_db.classes import ClassFull, ClassNotFound, ClassRateLimited, NotTheTeacher
from analysis.results_db.csvio import (
    EXPORT_COLUMNS,
    IMPORT_COLUMNS,
    MAX_IMPORT_BYTES,
    MAX_IMPORT_ROWS,
    OPTIONAL_COLUMNS,
    export_rows,
    parse_csv,
)
from analysis.results_db.engine import (
    SQLITE_BUSY_TIMEOUT_S,
    WRITE_ATTEMPTS,
    default_url,
    describe_database,
    dispose_engines,
    get_engine,
    session,
    write,
)
from analysis.results_db.migrate import drop_tables
from analysis.results_db.packs import MAX_SAVED_PACKS, PackNotFound, PackRateLimited, load_pack, save_pack
from analysis.results_db.queries import USER_MARK, catalog_frame, citation, data_version, results_frame
from analysis.results_db.schema import RESULT_SETTINGS, RESULT_SPLITS, SCHEMA_VERSION, Base, Meta, Metric, Model, Result, SavedPack, Source, Task, TrainingRun
from analysis.results_db.seeding import DATA_DIR, SeedReport, ensure_seeded, meta, seed_rows, seed_source_keys, seed_version
from analysis.results_db.writes import ImportReport, NewResult, StoredResult, add_result, delete_result, import_csv

__all__ = ["DATA_DIR", "EXPORT_COLUMNS", "IMPORT_COLUMNS", "MAX_IMPORT_BYTES", "MAX_IMPORT_ROWS", "MAX_SAVED_PACKS",
           "OPTIONAL_COLUMNS", "RESULT_SETTINGS", "RESULT_SPLITS", "SCHEMA_VERSION", "SQLITE_BUSY_TIMEOUT_S",
           "USER_MARK", "WRITE_ATTEMPTS", "Base", "ClassFull", "ClassNotFound", "ClassRateLimited", "ImportReport",
           "Meta", "Metric", "Model", "NewResult", "NotTheTeacher", "PackNotFound", "PackRateLimited", "Result", "SavedPack",
           "SeedReport", "Source", "StoredResult", "Task", "TrainingRun", "add_result", "catalog_frame", "citation",
           "data_version", "default_url", "delete_result", "describe_database", "dispose_engines", "drop_tables",
           "ensure_seeded", "export_rows", "get_engine", "import_csv", "load_pack", "meta", "parse_csv",
           "results_frame", "save_pack", "seed_rows", "seed_source_keys", "seed_version", "session",
           "write"]
