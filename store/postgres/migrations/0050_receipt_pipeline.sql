-- The receipt pipeline's durable log: receipts are appended here before
-- the webhook or agent is answered and deleted once merged. Ids come from
-- the sequence before the insert, so they follow input order, not commit
-- order.
CREATE TABLE receipt_log (
	id            BIGSERIAL PRIMARY KEY,
	message_id    TEXT   NOT NULL,
	account_id    TEXT   NOT NULL,
	receipt_type  TEXT   NOT NULL,
	event_time    BIGINT NOT NULL,
	callback_data TEXT   NOT NULL,
	recipient     TEXT   NOT NULL,
	error_code    BIGINT NOT NULL,
	error_title   TEXT   NOT NULL,
	source        TEXT   NOT NULL,
	received_at   BIGINT NOT NULL
);

-- Inbound messages are counted and kept minimally: no content, no number.
CREATE TABLE inbound_messages (
	account_id  TEXT   NOT NULL,
	wamid       TEXT   NOT NULL,
	type        TEXT   NOT NULL,
	sent_at     BIGINT NOT NULL,
	received_at BIGINT NOT NULL,
	PRIMARY KEY (account_id, wamid)
);
