-- The receipt log keeps one row per append instead of one per receipt
-- (package store/receiptlog says why): the receipts travel as one JSON
-- array of arrays, [message_id, account_id, receipt_type, event_time,
-- callback_data, recipient, error_code, error_title, source, received_at]
-- each. Receipts waiting in the old table move over as one-receipt
-- entries under their old ids.
CREATE TABLE receipt_log_entries (
	id       BIGSERIAL PRIMARY KEY,
	receipts INTEGER   NOT NULL,
	data     BYTEA     NOT NULL
);

INSERT INTO receipt_log_entries (id, receipts, data)
SELECT id, 1, convert_to(json_build_array(json_build_array(message_id, account_id, receipt_type, event_time,
	callback_data, recipient, error_code, error_title, source, received_at))::text, 'UTF8')
FROM receipt_log ORDER BY id;

SELECT setval(pg_get_serial_sequence('receipt_log_entries', 'id'),
	COALESCE((SELECT max(id) FROM receipt_log_entries), 0) + 1, false);

DROP TABLE receipt_log;
