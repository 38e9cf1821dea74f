// Package events tells the business what happened: it delivers the events
// of the store's outbox (message.status, message.inbound, account.state)
// to subscribed endpoints as Standard Webhooks, and serves them as a pull
// feed.
//
// Each subscription has a deliverer of its own. It moves the events that
// match the subscription from the feed into the store's pending
// deliveries (with the subscription's cursor, in one transaction), posts
// the due ones to the endpoint, several at a time, and settles the
// outcomes: a 2xx deletes the delivery, a 410 Gone disables the
// subscription, anything else schedules a retry with exponential backoff
// and full jitter. Only the first pending delivery of an order key (a
// message, or an account's state) is due, so one message's events arrive
// in version order, and a failing key holds back nothing but itself. A
// delivery that keeps failing for the retry window marks the subscription
// failing; its pending deliveries stay for when it is active again.
//
// Delivery is at least once: a crash after the endpoint's 2xx and before
// the settle repeats the event with the same webhook-id.
package events
