// Package sequence keeps each account's messages in client_seq order
// (guarantee 2). A Buffer is one account's reorder buffer; a Sequencer
// holds one Buffer per account for concurrent callers.
//
// What happens to an offered seq, with NextSeq the next seq to release:
//
//   - seq == NextSeq: Released, together with every waiting seq that is now
//     contiguous, in order.
//   - seq > NextSeq: Waiting (status waiting_seq) until its predecessors
//     arrive or it has waited the gap timeout. Then every missing seq below
//     it is skipped: counted in GapsSkipped, reported as a Range, and never
//     waited for again.
//   - seq < NextSeq and skipped: Held. It must not be sent out of order;
//     the caller parks it (status held) for an operator to release or drop.
//   - seq < NextSeq and released, or seq already waiting: Duplicate. It is
//     dropped by the buffer and never blocks anything: the buffer only ever
//     waits for seqs at or above NextSeq.
//   - seq < NextSeq but older than the buffer's memory: Late. See Late for
//     how the caller tells held from duplicate with its store.
//
// While ordering is switched off (dedup only), seqs go out without waiting;
// Pass tells the buffer, so that NextSeq follows them and, once ordering is
// on again, nothing waits for a seq already sent.
//
// Everything here is pure: time comes in as arguments (Buffer) or from an
// injected Clock (Sequencer), and persistence is the caller's, through
// State (a store.SeqState) and RestoreBuffer.
package sequence
