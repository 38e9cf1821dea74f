// Package sim is a simulator of the WhatsApp Cloud API send endpoint, used
// as the oracle by every test, demo and benchmark of the gateway.
//
// It answers POST /{version}/{phone_number_id}/messages with Meta's success
// and error shapes, enforces the per-number throughput and the pair rate
// limit, emits signed status webhooks (batched, retried, optionally
// duplicated, reordered and delayed), injects send faults, paces template
// sends (held_for_quality_assessment, statuses held or never sent), and records the
// ground truth: what each number accepted, in what order, and which
// biz_opaque_callback_data it accepted twice. Users' messages to a number
// (Inbound, POST /sim/numbers/{id}/inbound) count against its throughput,
// as with Meta, and arrive as signed inbound webhooks. /sim/stats,
// /sim/messages, /sim/numbers and /sim/reset expose it over HTTP; the same
// is available as Go methods for in-process tests.
package sim
