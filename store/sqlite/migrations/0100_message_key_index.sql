-- Numbering a new message no longer writes a scattered index entry.
--
-- Under migration 0090 every new message inserted one entry into the
-- unique index of message_keys on (account_id, message_id); provider ids
-- sort in no useful order, so each landed on a page of its own, and a
-- commit numbering a few hundred messages dirtied a few hundred index
-- pages, each written whole to the WAL and again by the checkpoint. That
-- index was the most expensive write of the receipt pipeline.
--
-- Now message_keys is only the ledger of numbers handed out, in number
-- order (appending touches its last page), and message_key_index maps a
-- message to its number. The index is filled in bulk, in key order, from
-- the ledger's tail (numbers above message_key_index_state.upto): each
-- index page is dirtied once per bulk fill instead of once per message.
-- Until its fill, a tail number is known from memory: the store loads
-- the tail when it opens and adds what it commits (keyindex.go).
CREATE TABLE message_keys_ledger (
	seq        INTEGER PRIMARY KEY,
	account_id TEXT NOT NULL,
	message_id TEXT NOT NULL
);

INSERT INTO message_keys_ledger (seq, account_id, message_id)
SELECT seq, account_id, message_id FROM message_keys ORDER BY seq;

CREATE TABLE message_key_index (
	account_id TEXT    NOT NULL,
	message_id TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	PRIMARY KEY (account_id, message_id)
) WITHOUT ROWID;

INSERT INTO message_key_index (account_id, message_id, seq)
SELECT account_id, message_id, seq FROM message_keys ORDER BY account_id, message_id;

DROP TABLE message_keys;
ALTER TABLE message_keys_ledger RENAME TO message_keys;

-- upto: every number up to it is in message_key_index.
CREATE TABLE message_key_index_state (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	upto INTEGER NOT NULL
);

INSERT INTO message_key_index_state (id, upto) SELECT 1, coalesce(max(seq), 0) FROM message_keys;
