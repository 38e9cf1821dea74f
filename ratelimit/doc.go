// Package ratelimit decides when an account may send: a token bucket per
// account (guarantee 6: at most rate×T + burst sends in any window T), a
// pacing limit per (account, recipient) pair, and an adaptive layer that
// backs off when the provider answers with a throughput error.
//
// The pieces compose; a dispatcher typically builds
//
//	accounts := ratelimit.NewAdaptive(ratelimit.NewLocal(...), ...)
//	pairs := ratelimit.NewPairLimiter(...)
//	gate := ratelimit.Gate{Accounts: accounts, Pairs: pairs}
//
// and asks gate.Admit before each send. Every limiter takes an injected
// Clock, so tests move time instead of sleeping. The Limiter and Pairs
// interfaces are the boundaries the Redis implementations (redislimit)
// also satisfy; both kinds pass the conformance suites in
// ratelimit/ratelimittest.
package ratelimit
