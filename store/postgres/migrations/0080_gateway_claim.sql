-- The gateway claim's fencing epoch (owner.go): every take of the gateway
-- lock, the first and each one after the lock connection broke, bumps it
-- while holding the lock. A gateway taking the lock again finds an epoch
-- other than its own last one only if another gateway took the store in
-- between, even one that has stopped since. claim is a random id per
-- Claim, so a bump whose answer was lost with the connection is still
-- known as this claim's. taken_at and holder (backend pid, application,
-- client address) are for the operator: written from the server's clock
-- and pg_stat_activity, never read back by the gateway.
CREATE TABLE gateway_claim (
	id       INTEGER     PRIMARY KEY CHECK (id = 1),
	epoch    BIGINT      NOT NULL,
	claim    TEXT        NOT NULL,
	taken_at TIMESTAMPTZ NOT NULL,
	holder   TEXT        NOT NULL
);
