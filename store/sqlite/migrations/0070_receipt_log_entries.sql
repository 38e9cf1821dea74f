-- The receipt log keeps one row per append (a group commit of the pipeline's
-- appender) instead of one per receipt: the receipts travel as one JSON
-- array of arrays, [message_id, account_id, receipt_type, event_time,
-- callback_data, recipient, error_code, error_title, source, received_at]
-- each. A row per receipt bound eleven values and dirtied its own index
-- entry on the append and again on the delete, which cost the single writer
-- about a fifth of its time under a receipt flood; one row per append costs
-- one value and one delete once all of its receipts are processed.
-- A receipt's log id is the entry id shifted left 16 bits plus its position
-- in the entry. Entries left by the per-receipt table move over as
-- one-receipt entries.
CREATE TABLE receipt_log_entries (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	receipts INTEGER NOT NULL,
	data     BLOB    NOT NULL
);

INSERT INTO receipt_log_entries (id, receipts, data)
SELECT id, 1, json_array(json_array(message_id, account_id, receipt_type, event_time, callback_data,
	recipient, error_code, error_title, source, received_at))
FROM receipt_log ORDER BY id;

DROP TABLE receipt_log;
