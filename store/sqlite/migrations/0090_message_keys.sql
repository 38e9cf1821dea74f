-- Message rows are clustered by arrival instead of by provider id.
--
-- Provider message ids (wamids) sort in no useful order: keyed by them,
-- every receipt of a message written a minute after the message's
-- previous one lands on a page of its own, which SQLite writes whole to
-- the WAL at commit and again at the checkpoint. Each message now gets a
-- sequence number the first time the store sees it (message_keys, a rowid
-- table: the number is the next rowid, so two processes sharing the file
-- cannot hand out the same one), and message_receipts is keyed by
-- (seq, entry): the receipts of messages seen around the same time share
-- pages, and statuses, which arrive roughly in sending order, touch few
-- pages per commit. Only the unique index of message_keys still takes one
-- scattered insert per new message; later receipts of the message only
-- read it.
CREATE TABLE message_keys (
	seq        INTEGER PRIMARY KEY,
	account_id TEXT NOT NULL,
	message_id TEXT NOT NULL,
	UNIQUE (account_id, message_id)
);

INSERT INTO message_keys (account_id, message_id)
SELECT account_id, message_id FROM message_receipts
GROUP BY account_id, message_id ORDER BY min(stamp), account_id, message_id;

-- entry: '' for the message's merged state, else a receipt type. type is
-- the merged type on the state row and '' on a receipt row; stamp is a
-- receipt's received_at and a state's updated_at (as in migration 0080).
CREATE TABLE message_receipts_by_seq (
	seq           INTEGER NOT NULL,
	entry         TEXT    NOT NULL,
	type          TEXT    NOT NULL DEFAULT '',
	event_time    INTEGER NOT NULL,
	error_code    INTEGER NOT NULL,
	callback_data TEXT    NOT NULL DEFAULT '',
	recipient     TEXT    NOT NULL DEFAULT '',
	error_title   TEXT    NOT NULL DEFAULT '',
	source        TEXT    NOT NULL DEFAULT '',
	stamp         INTEGER NOT NULL,
	PRIMARY KEY (seq, entry)
) WITHOUT ROWID;

INSERT INTO message_receipts_by_seq (seq, entry, type, event_time, error_code, callback_data, recipient,
	error_title, source, stamp)
SELECT k.seq, r.entry, r.type, r.event_time, r.error_code, r.callback_data, r.recipient, r.error_title,
	r.source, r.stamp
FROM message_receipts r JOIN message_keys k ON k.account_id = r.account_id AND k.message_id = r.message_id;

DROP TABLE message_receipts;
ALTER TABLE message_receipts_by_seq RENAME TO message_receipts;
