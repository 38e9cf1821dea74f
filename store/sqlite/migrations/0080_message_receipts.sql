-- Receipts and the merged state of their message share one b-tree,
-- clustered by message: the state row (entry '') sits next to the
-- message's receipt rows (entry = the receipt type), usually on the same
-- page. Provider message ids sort in no useful order, so on a table larger
-- than the page cache every receipt lands on a page of its own; with two
-- tables a merged receipt dirtied two pages (its receipt row and its
-- message's state), each written to the WAL at commit and again by the
-- checkpoint. Now the pipeline's insert and upsert, which share a commit,
-- usually dirty one.
--
-- type is the merged type on a state row and '' on a receipt row (whose
-- type is its entry); stamp is a receipt's received_at and a state's
-- updated_at. Columns a state row has no use for default to ''.
CREATE TABLE message_receipts (
	account_id    TEXT    NOT NULL,
	message_id    TEXT    NOT NULL,
	entry         TEXT    NOT NULL,
	type          TEXT    NOT NULL DEFAULT '',
	event_time    INTEGER NOT NULL,
	error_code    INTEGER NOT NULL,
	callback_data TEXT    NOT NULL DEFAULT '',
	recipient     TEXT    NOT NULL DEFAULT '',
	error_title   TEXT    NOT NULL DEFAULT '',
	source        TEXT    NOT NULL DEFAULT '',
	stamp         INTEGER NOT NULL,
	PRIMARY KEY (account_id, message_id, entry)
) WITHOUT ROWID;

INSERT INTO message_receipts (account_id, message_id, entry, event_time, error_code, callback_data, recipient,
	error_title, source, stamp)
SELECT account_id, message_id, receipt_type, event_time, error_code, callback_data, recipient, error_title, source,
	received_at
FROM receipts WHERE receipt_type <> '';

INSERT INTO message_receipts (account_id, message_id, entry, type, event_time, error_code, stamp)
SELECT account_id, message_id, '', type, event_time, error_code, updated_at FROM message_states;

DROP TABLE receipts;
DROP TABLE message_states;
