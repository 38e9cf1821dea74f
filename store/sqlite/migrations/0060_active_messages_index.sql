-- The (account, status) index only needs the statuses the gateway lists
-- when it restores its queues (ListMessages): messages still on their way
-- to the provider. A partial index leaves the later transitions (accepted
-- → sent → delivered → read, failed, dropped) untouched, which are most
-- status changes of a message's life; with the full index each of them
-- deleted and inserted an index entry. The list below must match
-- activeStatusesSQL in messages.go, which ListMessages repeats verbatim so
-- that SQLite's planner can use the index (it matches partial index
-- clauses by their text).
DROP INDEX messages_account_status;
CREATE INDEX messages_active ON messages (account_id, status, created_at)
	WHERE status IN ('waiting_seq', 'queued', 'sending', 'unknown', 'held');
