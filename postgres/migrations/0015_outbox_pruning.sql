-- Pruning and cheap figures for the outbox (issue 20); mirrors
-- sqlite/migrations/0015_outbox_pruning.sql. The dispatcher deletes
-- delivered deliveries older than server.webhook_retention, oldest first
-- in small batches (deliveries_delivered), then the events left with no
-- delivery (outbox_fanned_at; deliveries_event also keeps the foreign
-- key's check on each deleted event from scanning). The metrics count
-- each status from its own partial index instead of reading the whole
-- table at every scrape.
CREATE INDEX deliveries_delivered ON deliveries (delivered_at) WHERE status = 'delivered';
CREATE INDEX deliveries_dead ON deliveries (seq) WHERE status = 'dead';
CREATE INDEX deliveries_event ON deliveries (event_seq);
CREATE INDEX outbox_fanned_at ON outbox (at) WHERE fanned;
