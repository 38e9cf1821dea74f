-- Times are unix milliseconds in UTC; 0 stands for the zero time.

CREATE TABLE accounts (
	id              TEXT    PRIMARY KEY,
	phone_number_id TEXT    NOT NULL UNIQUE,
	access_token    TEXT    NOT NULL,
	base_url        TEXT    NOT NULL,
	rate_per_sec    DOUBLE PRECISION    NOT NULL,
	burst           BIGINT NOT NULL,
	state           TEXT    NOT NULL,
	cooldown_until  BIGINT NOT NULL,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL
);

CREATE TABLE messages (
	msg_id       TEXT    PRIMARY KEY,
	biz_type     TEXT    NOT NULL,
	account_id   TEXT    NOT NULL,
	client_seq   BIGINT,
	recipient    TEXT    NOT NULL,
	priority     BIGINT NOT NULL,
	type         TEXT    NOT NULL,
	payload      BYTEA,
	content_hash TEXT    NOT NULL,
	status       TEXT    NOT NULL,
	wamid        TEXT    UNIQUE,
	attempts     BIGINT NOT NULL,
	last_error   TEXT    NOT NULL,
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX messages_account_seq ON messages (account_id, client_seq) WHERE client_seq IS NOT NULL;
CREATE INDEX messages_account_status ON messages (account_id, status, created_at);

CREATE TABLE customer_owners (
	recipient  TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL,
	updated_at BIGINT NOT NULL
);

CREATE TABLE owner_moves (
	id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	recipient    TEXT    NOT NULL,
	from_account TEXT    NOT NULL,
	to_account   TEXT    NOT NULL,
	reason       TEXT    NOT NULL,
	moved_at     BIGINT NOT NULL
);
CREATE INDEX owner_moves_recipient ON owner_moves (recipient, id);

CREATE TABLE seq_state (
	account_id   TEXT    PRIMARY KEY,
	next_seq     BIGINT NOT NULL,
	gaps_skipped BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL
);

-- The primary key is the receipt's uniqueness triple.
CREATE TABLE receipts (
	message_id    TEXT    NOT NULL,
	account_id    TEXT    NOT NULL,
	receipt_type  TEXT    NOT NULL,
	event_time    BIGINT NOT NULL,
	callback_data TEXT    NOT NULL,
	recipient     TEXT    NOT NULL,
	error_code    BIGINT NOT NULL,
	error_title   TEXT    NOT NULL,
	source        TEXT    NOT NULL,
	received_at   BIGINT NOT NULL,
	PRIMARY KEY (message_id, account_id, receipt_type)
);

CREATE TABLE message_states (
	account_id TEXT    NOT NULL,
	message_id TEXT    NOT NULL,
	type       TEXT    NOT NULL,
	event_time BIGINT NOT NULL,
	error_code BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (account_id, message_id)
);

CREATE TABLE late_receipts (
	id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	message_id    TEXT    NOT NULL,
	account_id    TEXT    NOT NULL,
	receipt_type  TEXT    NOT NULL,
	event_time    BIGINT NOT NULL,
	callback_data TEXT    NOT NULL,
	recipient     TEXT    NOT NULL,
	error_code    BIGINT NOT NULL,
	error_title   TEXT    NOT NULL,
	source        TEXT    NOT NULL,
	received_at   BIGINT NOT NULL,
	reason        TEXT    NOT NULL,
	recorded_at   BIGINT NOT NULL
);
CREATE INDEX late_receipts_recorded ON late_receipts (recorded_at, id);

CREATE TABLE dead_letters (
	id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	source      TEXT    NOT NULL,
	account_id  TEXT    NOT NULL,
	reason      TEXT    NOT NULL,
	payload     BYTEA,
	recorded_at BIGINT NOT NULL
);
CREATE INDEX dead_letters_recorded ON dead_letters (recorded_at, id);

CREATE TABLE settings (
	key        TEXT    PRIMARY KEY,
	value      TEXT    NOT NULL,
	updated_at BIGINT NOT NULL
);
