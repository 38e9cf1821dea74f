-- Reads of inbound messages: a customer's messages to an account, newest
-- first, and the newest one's time (the customer service window); an
-- account's messages; the oldest received, for retention.
CREATE INDEX inbound_sender ON inbound_messages (account_id, sender, sent_at, wamid);
CREATE INDEX inbound_sent ON inbound_messages (account_id, sent_at, wamid);
CREATE INDEX inbound_received ON inbound_messages (received_at);
