-- A receipt row records when the pipeline applied it as its message's
-- merged state (unix ms; 0: never applied, e.g. a repeat, a weaker
-- receipt or one audited as late). A message whose rows the writer has
-- known since it numbered it needs no state row then: its state is the
-- applied receipt greatest by the merge order, and applying one costs no
-- second row write (statecache.go). A state row (entry '') still wins
-- wherever one exists.
ALTER TABLE message_receipts ADD COLUMN applied INTEGER NOT NULL DEFAULT 0;
