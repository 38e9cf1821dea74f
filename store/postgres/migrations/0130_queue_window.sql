-- The gateway holds a window of each account's queued messages in memory
-- and loads the next one from here (ListQueue) in the order the queue
-- sends them: messages without a client_seq by priority, then as stored;
-- those with one by client_seq; one recipient's as stored. The indexes
-- are partial on status = 'queued', so a message leaves them as soon as
-- it is sent and they stay the size of the backlog. CountQueued reads
-- the first two alone (priority is in both).
CREATE INDEX messages_queued ON messages (account_id, priority, created_at, stored_order)
	WHERE status = 'queued' AND client_seq IS NULL;
CREATE INDEX messages_queued_seq ON messages (account_id, client_seq, priority)
	WHERE status = 'queued' AND client_seq IS NOT NULL;
-- The recipient index holds a prefix of the recipient: a B-tree entry
-- must fit in a third of a page, and the store takes any recipient text.
-- ListQueue compares the prefix and then the whole recipient.
CREATE INDEX messages_queued_to ON messages (account_id, left(recipient, 200), created_at, stored_order)
	WHERE status = 'queued';
