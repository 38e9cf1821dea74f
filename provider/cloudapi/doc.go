// Package cloudapi speaks the WhatsApp Business Cloud API: it sends messages
// and classifies every outcome into what the dispatcher must do next, and it
// defines the status-webhook envelope together with its signature.
//
// The client never retries by itself. Send reports what happened (accepted,
// retry after a delay, slow the account down, …); one retry loop in the
// dispatcher owns backoff, attempts and compensation. Keeping the decision
// here and the loop there means the classification is a pure function that
// can be table-tested and fuzzed.
package cloudapi
