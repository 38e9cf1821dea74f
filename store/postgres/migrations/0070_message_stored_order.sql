-- Messages stored by one InsertMessages share their created_at; the order
-- they were given (submitted) is kept in stored_order, so that lists, and
-- the queues a restart rebuilds from them, keep it (ties used to go by
-- msg_id). The insert assigns it in input order (ORDER BY ord). Existing
-- rows are numbered in created_at, msg_id order, as they were listed.
ALTER TABLE messages ADD COLUMN stored_order BIGINT;
CREATE SEQUENCE messages_stored_order_seq OWNED BY messages.stored_order;
UPDATE messages SET stored_order = o.n FROM (
	SELECT msg_id, row_number() OVER (ORDER BY created_at, msg_id) AS n FROM messages
) o WHERE messages.msg_id = o.msg_id;
SELECT setval('messages_stored_order_seq', COALESCE((SELECT max(stored_order) FROM messages), 0) + 1, false);
ALTER TABLE messages ALTER COLUMN stored_order SET DEFAULT nextval('messages_stored_order_seq');
ALTER TABLE messages ALTER COLUMN stored_order SET NOT NULL;
