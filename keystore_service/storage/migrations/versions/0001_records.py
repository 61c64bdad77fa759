"""Tenants, tokens, records and the attempt history.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def exact(length=None):
    base = sa.String(length) if length else sa.Text()
    pg = postgresql.VARCHAR(length, collation="C") if length else postgresql.TEXT(collation="C")
    return base.with_variant(pg, "postgresql")


def upgrade() -> None:
    _tenants()
    _tokens()
    _records(sqlite=op.get_bind().dialect.name == "sqlite")
    _attempts()


def _tenants() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", exact(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("name", name="uq_tenants_name"),
        sa.CheckConstraint("length(name) BETWEEN 1 AND 64", name="ck_tenants_name_length"),
    )


def _tokens() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id",
                  name="fk_tokens_tenant_id_tenants"), nullable=False),
        sa.Column("name", exact(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("revoked_at", sa.BigInteger, nullable=True),
        sa.UniqueConstraint("token_hash", name="uq_tokens_token_hash"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_tokens_tenant_id_name"),
        sa.CheckConstraint("role IN ('client', 'operator')", name="ck_tokens_role"),
        sa.CheckConstraint("length(name) BETWEEN 1 AND 128", name="ck_tokens_name_length"),
    )


def _records(sqlite: bool) -> None:
    scope_charset = ("scope NOT GLOB '*[^A-Za-z0-9_.:-]*'" if sqlite
                     else "scope ~ '^[A-Za-z0-9_.:-]+$'")
    op.create_table(
        "records",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id",
                  name="fk_records_tenant_id_tenants"), nullable=False),
        sa.Column("scope", exact(128), nullable=False),
        sa.Column("key", exact(), nullable=False),
        sa.Column("state", sa.String(24), nullable=False),
        sa.Column("fingerprint", exact(256), nullable=True),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("incarnation", sa.Integer, nullable=False),
        sa.Column("lease_token_hash", sa.String(64), nullable=True),
        sa.Column("lease_acquired_at", sa.BigInteger, nullable=True),
        sa.Column("lease_expires_at", sa.BigInteger, nullable=True),
        sa.Column("on_stale", sa.String(16), nullable=False),
        sa.Column("first_seen_at", sa.BigInteger, nullable=False),
        sa.Column("last_seen_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("duplicate_count", sa.BigInteger, nullable=False),
        sa.Column("checkpoint_step", sa.Text, nullable=True),
        sa.Column("checkpoint_resource_id", sa.Text, nullable=True),
        sa.Column("checkpoint_at", sa.BigInteger, nullable=True),
        sa.Column("result", sa.Text, nullable=True),
        sa.UniqueConstraint("tenant_id", "scope", "key", name="uq_records_tenant_id_scope_key"),
        sa.CheckConstraint("length(scope) BETWEEN 1 AND 128", name="ck_records_scope_length"),
        sa.CheckConstraint(scope_charset, name="ck_records_scope_charset"),
        sa.CheckConstraint("length(key) BETWEEN 1 AND 512", name="ck_records_key_length"),
        sa.CheckConstraint("fingerprint IS NULL OR length(fingerprint) BETWEEN 1 AND 256",
                           name="ck_records_fingerprint_length"),
        sa.CheckConstraint("state IN ('in_progress', 'succeeded', 'failed', 'released', "
                           "'needs_reconciliation')", name="ck_records_state"),
        sa.CheckConstraint("on_stale IN ('reconcile', 'retry')", name="ck_records_on_stale"),
        sa.CheckConstraint("attempt >= 1 AND incarnation >= 1 AND duplicate_count >= 0",
                           name="ck_records_counters"),
        sa.CheckConstraint("state <> 'in_progress' OR lease_expires_at IS NOT NULL",
                           name="ck_records_lease_when_in_progress"),
    )


def _attempts() -> None:
    op.create_table(
        "attempts",
        sa.Column("id", Id, primary_key=True),
        sa.Column("record_id", Id, sa.ForeignKey("records.id", ondelete="CASCADE",
                  name="fk_attempts_record_id_records"), nullable=False),
        sa.Column("incarnation", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.BigInteger, nullable=False),
        sa.Column("ended_at", sa.BigInteger, nullable=False),
        sa.Column("ending", sa.String(24), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.CheckConstraint("ending IN ('succeeded', 'failed', 'released', 'taken_over', "
                           "'resolved')", name="ck_attempts_ending"),
    )
    op.create_index("ix_attempts_record_id_incarnation_attempt", "attempts",
                    ["record_id", "incarnation", "attempt"])


def downgrade() -> None:
    op.drop_table("attempts")
    op.drop_table("records")
    op.drop_table("tokens")
    op.drop_table("tenants")
