-- The SHA-256 (hex) of each applied migration file, checked at every
-- open: a file edited after it was applied would leave databases that
-- ran the old text and databases that ran the new one with the same
-- version. The runner fills it for the migrations applied before it.
ALTER TABLE schema_migrations ADD COLUMN checksum TEXT;
