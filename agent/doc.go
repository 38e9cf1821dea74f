// Package agent is the client side of POST /v1/receipts:batch: a library
// for account agents that report WhatsApp status receipts to the gateway
// themselves instead of through Meta's webhook.
//
// The agent never loses a receipt it has accepted. Report returns only once
// the receipt is fsynced into an append-only spool on local disk; a
// background loop batches spooled receipts (every FlushInterval or
// FlushEvents receipts, whichever comes first), posts them, and only the
// gateway's 2xx answer for them (counting every receipt of the batch as
// accepted or duplicate; any other 2xx, say from a proxy, is retried)
// moves the durable ack mark past them. A weak network,
// a gateway outage or a kill -9 therefore costs time, never data: a new
// Agent on the same SpoolDir re-sends everything that was not acked.
//
// Durability has a price per call: one Report waits for one fsync, shared
// with whatever other Reports run at the same time. A caller that has many
// receipts at once should hand them over with ReportBatch, which makes them
// durable together.
//
// A configuration error is no reason to drop anything: a 401 (wrong or
// rotated APIKey), a 403 (a key without the right to post receipts), a 404
// (a GatewayURL that does not serve the route) and a 400 `unknown
// account_id "…"` (an agent started before its account was created) say
// nothing about the receipts and hit every batch alike. The batch stays in
// the spool and is retried with the usual backoff (at most BackoffCap
// apart), each attempt logged at Error level with the status, the
// gateway's code and message and what to fix, and counted in
// Stats.ConfigErrors (and Retries). Once the key, the URL or the account is
// fixed — on the gateway, or by restarting the agent on the same SpoolDir
// with the right Config — everything reported meanwhile is delivered.
// Reports go on being spooled meanwhile, so the spool grows until then.
//
// A batch the gateway rejects for good (any other 4xx but 408 and 429: bad
// input) is not retried: it is written to the dead-letter file, logged and
// dropped from the spool, so one bad batch never blocks the ones behind
// it. Nothing replays that file; it is for an operator to read. A 400
// that names one receipt of the batch ("receipts[3]: …") dead-letters that
// receipt alone: the receipts before it are sent on their own and the
// rest again, so good receipts are not dropped with a bad one. A 413 (a proxy in front of the gateway
// with a body limit below the gateway's) splits the batch in halves until
// each passes; only a receipt too large to pass alone is dead-lettered.
// Report validates receipts the way the gateway does, so in practice
// little ends there: a gateway whose rules differ from the agent's, or
// an event_time the agent's clock took as at most
// wamux.MaxEventTimeAhead ahead and the gateway's, when the batch came,
// as further. A
// dead-lettered receipt reported again is sent again, not dropped as a
// repeat.
//
// Delivery is at least once. A batch whose ack was lost is sent again; the
// gateway deduplicates on (message_id, account_id, type), so the repeat is
// counted as a duplicate there and changes nothing. To keep such repeats
// rare in normal operation the agent also drops, before spooling, any
// receipt whose (message_id, type) it reported recently (an LRU of LRUSize
// ids).
//
// # Spool layout
//
// SpoolDir holds segment files named after the sequence number of their
// first record ("00000000000000000001.seg"), an "ack" file with the highest
// acknowledged sequence number, an "account" file with the id of the
// account the spool belongs to, a "lock" file that keeps a second agent out
// of the directory, and "deadletter.jsonl" for batches the gateway rejected
// for good (a 4xx other than 408, 429 and the configuration errors above).
//
// Records carry no account id: every batch is sent as Config.AccountID.
// So that receipts left in the spool are never sent as another account's,
// New refuses (ErrSpoolAccount) a SpoolDir whose "account" file names
// another account while unacknowledged receipts remain in it; the operator
// then starts the agent with the old AccountID until they are delivered,
// or gives the new account its own SpoolDir. A spool with nothing left to
// send changes hands: New rewrites the file for the new account. A spool
// written by an agent from before the "account" file existed names no
// account; New adopts it for Config.AccountID and sends what it holds as
// that account's, so such a spool must first be opened with the AccountID
// that wrote it. The file is written durably (temporary file, fsync,
// rename, directory fsync) before the first record of its account.
//
// A segment is a sequence of records:
//
//	uint32 big-endian  payload length (1…8192)
//	uint32 big-endian  CRC-32C (Castagnoli) of the payload
//	payload            JSON: {"seq","message_id","type","event_time","version"?}
//
// A crash can leave the last record of a segment torn; the CRC and the
// length tell it apart from a whole record, and it is skipped with a
// warning. Such a record was never acknowledged to the caller: Report had
// not returned. After a kill -9 a segment may hold records whose fsync
// never ran; a new Agent fsyncs every segment it re-sends from before New
// returns, since a Report repeating one of those records is dropped. A
// whole record whose payload does not decode (written by another version,
// say) is skipped alone, with an error in the log; the records after it
// are read.
package agent
