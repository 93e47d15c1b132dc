-- The quota database on SQLite: tenants (an API key, its tier and the time
-- its record is in force), their overrides, and the append-only audit log.
-- Times are INTEGER Unix microseconds (UTC); NULL where the model says "no
-- time". Text compares bytewise (BINARY): the key order of a listing.

CREATE TABLE tenants (
    api_key      TEXT NOT NULL PRIMARY KEY,
    tier         TEXT NOT NULL,
    effective_at INTEGER,          -- NULL: in force from the start
    expires_at   INTEGER,          -- NULL: never expires
    version      INTEGER NOT NULL CHECK (version >= 1),
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- a listing by tier, in key order
CREATE INDEX tenants_tier ON tenants (tier, api_key);

-- One row an override; position is its place in the record. A limit has a
-- window (unit) or a calendar period (calendar, in time_zone; NULL = UTC).
CREATE TABLE quota_overrides (
    api_key           TEXT NOT NULL REFERENCES tenants (api_key) ON DELETE CASCADE,
    position          INTEGER NOT NULL CHECK (position >= 0),
    descriptor        TEXT NOT NULL,
    requests_per_unit INTEGER NOT NULL
                      CHECK (requests_per_unit BETWEEN 0 AND 4294967295),
    unit              TEXT CHECK (unit IN ('second', 'minute', 'hour', 'day', 'week',
                                           'month', 'year')),
    calendar          TEXT CHECK (calendar IN ('day', 'month', 'year')),
    time_zone         TEXT,
    algorithm         TEXT,            -- NULL: the replaced limit's
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (api_key, position),
    UNIQUE (api_key, descriptor, unit, calendar),
    CHECK ((unit IS NULL) <> (calendar IS NULL))
) WITHOUT ROWID;

CREATE TABLE audit_log (
    id       INTEGER PRIMARY KEY,
    at       INTEGER NOT NULL,
    actor    TEXT NOT NULL,
    action   TEXT NOT NULL CHECK (action IN ('create', 'update', 'delete')),
    api_key  TEXT NOT NULL,
    "before" TEXT,                     -- the record as JSON, NULL before a create
    "after"  TEXT                      -- NULL after a delete
);

CREATE INDEX audit_log_key ON audit_log (api_key, id);

-- Append-only, whoever writes to the file.
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
