-- The gateway holds a window of each account's queued messages in memory
-- and loads the next one from here (ListQueue) in the order the queue
-- sends them: messages without a client_seq by priority, then as stored;
-- those with one by client_seq; one recipient's as stored. The indexes
-- are partial on status = 'queued', so a message leaves them as soon as
-- it is sent and they stay the size of the backlog. CountQueued reads
-- the first two without touching the table (priority and client_seq are
-- in both).
-- ListQueue repeats each WHERE clause verbatim: SQLite uses a partial
-- index only when the query's clause contains the index's terms.
CREATE INDEX messages_queued ON messages (account_id, priority, created_at, client_seq)
	WHERE status = 'queued' AND client_seq IS NULL;
CREATE INDEX messages_queued_seq ON messages (account_id, client_seq, priority)
	WHERE status = 'queued' AND client_seq IS NOT NULL;
CREATE INDEX messages_queued_to ON messages (account_id, recipient, created_at)
	WHERE status = 'queued';
