-- Admin actions made through the API (GET /v1/audit): who, what, when.
-- fields holds the names of the fields set, comma-separated; no values.
CREATE TABLE admin_audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    key_id  TEXT NOT NULL,
    route   TEXT NOT NULL,
    target  TEXT NOT NULL,
    fields  TEXT NOT NULL
);
