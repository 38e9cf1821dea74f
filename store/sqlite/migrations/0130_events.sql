-- The event outbox. Triggers on messages, accounts and inbound_messages
-- write an event row in the statement, and so the transaction, that makes
-- the change it reports: a committed change always has its event, a
-- rolled-back one never. The id orders events in commit order (one
-- writer) and is also the event's version: a message's changes are
-- committed one after the other, so its events' ids grow with them.
--
-- message.status rows keep what may change later (account, status,
-- wamid, last error); a message's fixed fields are read from messages.
-- account.state rows keep the effective states (an active account whose
-- cooldown_until lies ahead is in cooldown), the reason and the end.
-- message.inbound rows keep the event data written at intake.
CREATE TABLE events (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	type            TEXT    NOT NULL,
	account_id      TEXT    NOT NULL,
	msg_id          TEXT    NOT NULL DEFAULT '',
	status          TEXT    NOT NULL DEFAULT '',
	previous_status TEXT    NOT NULL DEFAULT '',
	wamid           TEXT    NOT NULL DEFAULT '',
	detail          TEXT    NOT NULL DEFAULT '',
	until_at        INTEGER NOT NULL DEFAULT 0,
	data            TEXT    NOT NULL DEFAULT '',
	created_at      INTEGER NOT NULL
);
CREATE INDEX events_created ON events (created_at);
-- The previous reported status of a message; its queries repeat the
-- index's condition, without which neither engine uses a partial index.
CREATE INDEX events_msg ON events (msg_id, id) WHERE msg_id <> '';

ALTER TABLE accounts ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';

-- Inbound messages keep their sender and the event data (content as the
-- provider sent it) for the inbound retention period.
ALTER TABLE inbound_messages ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE inbound_messages ADD COLUMN data TEXT NOT NULL DEFAULT '';

-- The statuses a business hears about: those the provider reports and
-- the gateway's own outcomes. queued, waiting_seq and sending are steps
-- inside the gateway.
CREATE TRIGGER messages_status_event AFTER UPDATE OF status ON messages
WHEN new.status <> old.status
	AND new.status IN ('accepted', 'sent', 'delivered', 'read', 'failed', 'dropped', 'held', 'unknown')
BEGIN
	INSERT INTO events (type, account_id, msg_id, status, previous_status, wamid, detail, created_at)
	VALUES ('message.status', new.account_id, new.msg_id, new.status,
		COALESCE((SELECT e.status FROM events e WHERE e.msg_id = new.msg_id AND e.msg_id <> '' ORDER BY e.id DESC LIMIT 1), ''),
		COALESCE(new.wamid, ''), new.last_error, new.updated_at);
END;

CREATE TRIGGER messages_insert_event AFTER INSERT ON messages
WHEN new.status IN ('accepted', 'sent', 'delivered', 'read', 'failed', 'dropped', 'held', 'unknown')
BEGIN
	INSERT INTO events (type, account_id, msg_id, status, wamid, detail, created_at)
	VALUES ('message.status', new.account_id, new.msg_id, new.status, COALESCE(new.wamid, ''), new.last_error,
		new.updated_at);
END;

CREATE TRIGGER accounts_state_event AFTER UPDATE OF state, cooldown_until ON accounts
WHEN (CASE WHEN old.state = 'active' AND old.cooldown_until > new.updated_at THEN 'cooldown' ELSE old.state END)
		<> (CASE WHEN new.state = 'active' AND new.cooldown_until > new.updated_at THEN 'cooldown' ELSE new.state END)
	OR ((CASE WHEN new.state = 'active' AND new.cooldown_until > new.updated_at THEN 'cooldown' ELSE new.state END) = 'cooldown'
		AND new.cooldown_until <> old.cooldown_until)
BEGIN
	INSERT INTO events (type, account_id, status, previous_status, detail, until_at, created_at)
	VALUES ('account.state', new.id,
		CASE WHEN new.state = 'active' AND new.cooldown_until > new.updated_at THEN 'cooldown' ELSE new.state END,
		CASE WHEN old.state = 'active' AND old.cooldown_until > new.updated_at THEN 'cooldown' ELSE old.state END,
		new.state_reason, new.cooldown_until, new.updated_at);
END;

CREATE TRIGGER inbound_event AFTER INSERT ON inbound_messages
WHEN new.data <> ''
BEGIN
	INSERT INTO events (type, account_id, wamid, data, created_at)
	VALUES ('message.inbound', new.account_id, new.wamid, new.data, new.received_at);
END;

-- Subscriptions: where and what to deliver. secrets holds the signing
-- secrets, sealed; cursor is the last event id handed to its deliveries.
CREATE TABLE subscriptions (
	id          TEXT    PRIMARY KEY,
	url         TEXT    NOT NULL,
	events      TEXT    NOT NULL,
	account_ids TEXT    NOT NULL,
	description TEXT    NOT NULL,
	state       TEXT    NOT NULL,
	state_reason TEXT   NOT NULL DEFAULT '',
	secret      TEXT    NOT NULL,
	old_secret  TEXT    NOT NULL DEFAULT '',
	old_secret_until INTEGER NOT NULL DEFAULT 0,
	cursor      TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);

-- An event waiting for delivery to one subscription. order_key names
-- what the event must be delivered in order with (its message; an
-- account for account.state): only the lowest pending event of a key is
-- due.
CREATE TABLE deliveries (
	subscription_id TEXT    NOT NULL,
	event_id        INTEGER NOT NULL,
	order_key       TEXT    NOT NULL,
	attempts        INTEGER NOT NULL DEFAULT 0,
	next_at         INTEGER NOT NULL,
	first_failed_at INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (subscription_id, event_id)
) WITHOUT ROWID;
CREATE INDEX deliveries_key ON deliveries (subscription_id, order_key, event_id);
