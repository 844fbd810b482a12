"""Alembic's entry point for the ledger (called by pipeline.ledger.migrations, never by hand)."""

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlmodel import SQLModel
from sqlmodel.sql.sqltypes import AutoString, UTCDateTime

from pipeline.ledger import models  # noqa: F401  (registers the ledger's tables on SQLModel.metadata)
from pipeline.ledger.migrations import LEDGER_TABLES


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    # Only the ledger's own tables: a database shared with other software is none of our business.
    return type_ != "table" or name in LEDGER_TABLES


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    # Revisions are frozen history: write plain SQLAlchemy types, not SQLModel's wrappers of them.
    if type_ == "type" and isinstance(obj, AutoString):
        return "sa.String()"
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


options: dict[str, Any] = dict(target_metadata=SQLModel.metadata, render_as_batch=True, compare_type=True,
               include_name=include_name, render_item=render_item)
connection = context.config.attributes.get("connection")
if connection is None:  # offline: `pipeline ledger migrate --sql`
    context.configure(url=context.config.get_main_option("sqlalchemy.url"), literal_binds=True, **options)
else:
    context.configure(connection=connection, **options)
with context.begin_transaction():
    context.run_migrations()
