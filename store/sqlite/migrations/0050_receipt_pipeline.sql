-- The receipt pipeline's durable log (embedded mode): receipts are appended
-- here before the webhook or agent is answered and deleted once merged.
-- AUTOINCREMENT keeps ids from being reused after the log empties.
CREATE TABLE receipt_log (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	message_id    TEXT    NOT NULL,
	account_id    TEXT    NOT NULL,
	receipt_type  TEXT    NOT NULL,
	event_time    INTEGER NOT NULL,
	callback_data TEXT    NOT NULL,
	recipient     TEXT    NOT NULL,
	error_code    INTEGER NOT NULL,
	error_title   TEXT    NOT NULL,
	source        TEXT    NOT NULL,
	received_at   INTEGER NOT NULL
);

-- Inbound messages are counted and kept minimally: no content, no number.
CREATE TABLE inbound_messages (
	account_id  TEXT    NOT NULL,
	wamid       TEXT    NOT NULL,
	type        TEXT    NOT NULL,
	sent_at     INTEGER NOT NULL,
	received_at INTEGER NOT NULL,
	PRIMARY KEY (account_id, wamid)
) WITHOUT ROWID;
