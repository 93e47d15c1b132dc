-- The quota database on PostgreSQL: tenants (an API key, its tier and the
-- time its record is in force), their overrides, and the append-only audit
-- log. Keys are COLLATE "C": bytewise, the key order of a listing, and the
-- order of the primary key's index.

CREATE TABLE tenants (
    api_key      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    tier         TEXT NOT NULL,
    effective_at TIMESTAMPTZ,          -- NULL: in force from the start
    expires_at   TIMESTAMPTZ,          -- NULL: never expires
    version      BIGINT NOT NULL CHECK (version >= 1),
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL
);

-- a listing by tier, in key order
CREATE INDEX tenants_tier ON tenants (tier, api_key);

-- One row an override; position is its place in the record. A limit has a
-- window (unit) or a calendar period (calendar, in time_zone; NULL = UTC).
CREATE TABLE quota_overrides (
    api_key           TEXT COLLATE "C" NOT NULL
                      REFERENCES tenants (api_key) ON DELETE CASCADE,
    position          INTEGER NOT NULL CHECK (position >= 0),
    descriptor        TEXT NOT NULL,
    requests_per_unit BIGINT NOT NULL
                      CHECK (requests_per_unit BETWEEN 0 AND 4294967295),
    unit              TEXT CHECK (unit IN ('second', 'minute', 'hour', 'day', 'week',
                                           'month', 'year')),
    calendar          TEXT CHECK (calendar IN ('day', 'month', 'year')),
    time_zone         TEXT,
    algorithm         TEXT,                -- NULL: the replaced limit's
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (api_key, position),
    UNIQUE (api_key, descriptor, unit, calendar),
    CHECK ((unit IS NULL) <> (calendar IS NULL))
);

CREATE TABLE audit_log (
    id       BIGSERIAL PRIMARY KEY,
    at       TIMESTAMPTZ NOT NULL,
    actor    TEXT NOT NULL,
    action   TEXT NOT NULL CHECK (action IN ('create', 'update', 'delete')),
    api_key  TEXT COLLATE "C" NOT NULL,
    "before" TEXT,                         -- the record as JSON, NULL before a create
    "after"  TEXT                          -- NULL after a delete
);

CREATE INDEX audit_log_key ON audit_log (api_key, id);

-- Append-only, whoever connects: no UPDATE, DELETE or TRUNCATE.
CREATE FUNCTION weir_audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END
$$;

CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION weir_audit_log_append_only();

CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION weir_audit_log_append_only();
