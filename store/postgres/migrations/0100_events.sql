-- The event outbox. Triggers on messages, accounts and inbound_messages
-- write an event row in the transaction that makes the change it
-- reports: a committed change always has its event, a rolled-back one
-- never. The id is the event's version: the trigger takes it while the
-- changed row is locked, so a message's later change gets a larger id.
-- Readers of the feed order by (txid, id) and read only events whose
-- transaction is older than every transaction still running, so no event
-- becomes readable behind a cursor already handed out.
--
-- message.status rows keep what may change later (account, status,
-- wamid, last error); a message's fixed fields are read from messages.
-- account.state rows keep the effective states (an active account whose
-- cooldown_until lies ahead is in cooldown), the reason and the end.
-- message.inbound rows keep the event data written at intake.
CREATE TABLE events (
	id              BIGSERIAL PRIMARY KEY,
	txid            XID8   NOT NULL DEFAULT pg_current_xact_id(),
	type            TEXT   NOT NULL,
	account_id      TEXT   NOT NULL,
	msg_id          TEXT   NOT NULL DEFAULT '',
	status          TEXT   NOT NULL DEFAULT '',
	previous_status TEXT   NOT NULL DEFAULT '',
	wamid           TEXT   NOT NULL DEFAULT '',
	detail          TEXT   NOT NULL DEFAULT '',
	until_at        BIGINT NOT NULL DEFAULT 0,
	data            TEXT   NOT NULL DEFAULT '',
	created_at      BIGINT NOT NULL
);
CREATE INDEX events_feed ON events (txid, id);
CREATE INDEX events_created ON events (created_at);
CREATE INDEX events_msg ON events (msg_id, id) WHERE msg_id <> '';

ALTER TABLE accounts ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';

ALTER TABLE inbound_messages ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE inbound_messages ADD COLUMN data TEXT NOT NULL DEFAULT '';

-- The statuses a business hears about: those the provider reports and
-- the gateway's own outcomes. queued, waiting_seq and sending are steps
-- inside the gateway.
CREATE FUNCTION wamux_message_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.status NOT IN ('accepted', 'sent', 'delivered', 'read', 'failed', 'dropped', 'held', 'unknown') THEN
		RETURN NULL;
	END IF;
	IF TG_OP = 'UPDATE' AND NEW.status = OLD.status THEN
		RETURN NULL;
	END IF;
	INSERT INTO events (type, account_id, msg_id, status, previous_status, wamid, detail, created_at)
	VALUES ('message.status', NEW.account_id, NEW.msg_id, NEW.status,
		COALESCE((SELECT e.status FROM events e WHERE e.msg_id = NEW.msg_id AND e.msg_id <> '' ORDER BY e.id DESC LIMIT 1), ''),
		COALESCE(NEW.wamid, ''), NEW.last_error, NEW.updated_at);
	RETURN NULL;
END $$;

CREATE TRIGGER messages_status_event AFTER INSERT OR UPDATE OF status ON messages
FOR EACH ROW EXECUTE FUNCTION wamux_message_event();

CREATE FUNCTION wamux_account_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	was TEXT := CASE WHEN OLD.state = 'active' AND OLD.cooldown_until > NEW.updated_at THEN 'cooldown' ELSE OLD.state END;
	now_state TEXT := CASE WHEN NEW.state = 'active' AND NEW.cooldown_until > NEW.updated_at THEN 'cooldown' ELSE NEW.state END;
BEGIN
	IF was <> now_state OR (now_state = 'cooldown' AND NEW.cooldown_until <> OLD.cooldown_until) THEN
		INSERT INTO events (type, account_id, status, previous_status, detail, until_at, created_at)
		VALUES ('account.state', NEW.id, now_state, was, NEW.state_reason, NEW.cooldown_until, NEW.updated_at);
	END IF;
	RETURN NULL;
END $$;

CREATE TRIGGER accounts_state_event AFTER UPDATE OF state, cooldown_until ON accounts
FOR EACH ROW EXECUTE FUNCTION wamux_account_event();

CREATE FUNCTION wamux_inbound_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.data <> '' THEN
		INSERT INTO events (type, account_id, wamid, data, created_at)
		VALUES ('message.inbound', NEW.account_id, NEW.wamid, NEW.data, NEW.received_at);
	END IF;
	RETURN NULL;
END $$;

CREATE TRIGGER inbound_event AFTER INSERT ON inbound_messages
FOR EACH ROW EXECUTE FUNCTION wamux_inbound_event();

-- Subscriptions: where and what to deliver. secret and old_secret are
-- sealed; cursor is the feed position up to which events were handed to
-- its deliveries (txid, id).
CREATE TABLE subscriptions (
	id               TEXT   PRIMARY KEY,
	url              TEXT   NOT NULL,
	events           TEXT   NOT NULL,
	account_ids      TEXT   NOT NULL,
	description      TEXT   NOT NULL,
	state            TEXT   NOT NULL,
	state_reason     TEXT   NOT NULL DEFAULT '',
	secret           TEXT   NOT NULL,
	old_secret       TEXT   NOT NULL DEFAULT '',
	old_secret_until BIGINT NOT NULL DEFAULT 0,
	cursor           TEXT   NOT NULL,
	created_at       BIGINT NOT NULL,
	updated_at       BIGINT NOT NULL
);

-- An event waiting for delivery to one subscription. order_key names
-- what the event must be delivered in order with (its message; an
-- account for account.state): only the lowest pending event of a key is
-- due.
CREATE TABLE deliveries (
	subscription_id TEXT   NOT NULL,
	event_id        BIGINT NOT NULL,
	order_key       TEXT   NOT NULL,
	attempts        BIGINT NOT NULL DEFAULT 0,
	next_at         BIGINT NOT NULL,
	first_failed_at BIGINT NOT NULL DEFAULT 0,
	last_error      TEXT   NOT NULL DEFAULT '',
	PRIMARY KEY (subscription_id, event_id)
);
CREATE INDEX deliveries_key ON deliveries (subscription_id, order_key, event_id);
