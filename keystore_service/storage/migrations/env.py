"""Alembic environment: run with the connection that `keystore_service.migrate` hands in."""
from alembic import context

from keystore_service.storage.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
