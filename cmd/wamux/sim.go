package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux/sim"
)

// simOptions is what the sim flags fill in.
type simOptions struct {
	listen   string
	logLevel string
	pprof    bool
	gogc     int
	cfg      sim.Config
	// badNumbers counts --number values without both an id and a token.
	// They are refused after parsing, not by the flag's Set: the flag
	// package would quote the value, which is or holds a token.
	badNumbers int
}

// simFlags declares every flag of `wamux sim`; the test walks the same set
// to check that --help documents each one.
func simFlags(stderr io.Writer) (*flag.FlagSet, *simOptions) {
	o := &simOptions{}
	c := &o.cfg
	fs := flag.NewFlagSet("wamux sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux sim [flags]")
		fmt.Fprintln(stderr, "\nRuns a WhatsApp Cloud API simulator: POST /{version}/{phone_number_id}/messages with")
		fmt.Fprintln(stderr, "Meta's bodies, limits, signed status webhooks and injected faults. Ground truth at")
		fmt.Fprintln(stderr, "GET /sim/stats and GET /sim/messages?phone_number_id=&to=; POST /sim/reset;")
		fmt.Fprintln(stderr, "numbers can be added at run time with POST /sim/numbers, and one number's faults")
		fmt.Fprintln(stderr, "changed with PUT /sim/numbers/{id}/faults; POST /sim/numbers/{id}/inbound {\"count\":n,\"type\":\"image\"}")
		fmt.Fprintln(stderr, "has users write to a number (counted against its throughput, sent as inbound webhooks), and")
		fmt.Fprintln(stderr, "{\"status\":\"read\",\"message_id\":...} on the messages endpoint marks one as read.")
		fmt.Fprintln(stderr, "The flags below set every number's faults.")
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}

	fs.StringVar(&o.listen, "listen", "127.0.0.1:8090", "`address` to listen on (port 0 picks a free one)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.IntVar(&o.gogc, "gogc", 400, "garbage-collector target `percent`; the sim keeps every accepted message, so a higher target trades memory for CPU (0 keeps $GOGC)")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go profiles at /debug/pprof/ (to find the simulator's own bottlenecks)")
	fs.Func("number", "register a phone number as `id:token` (repeatable; tokens are never printed)", func(v string) error {
		id, tok, ok := strings.Cut(v, ":")
		if !ok || id == "" || tok == "" {
			o.badNumbers++
			return nil
		}
		c.Numbers = append(c.Numbers, sim.Number{PhoneNumberID: id, AccessToken: tok})
		return nil
	})

	fs.Float64Var(&c.Limits.Rate, "rate", sim.RateDefault, "throughput limit per number in messages/s (excess → 130429)")
	fs.IntVar(&c.Limits.Burst, "burst", 0, "messages a number may send at once (default: one second's worth of --rate)")
	fs.BoolVar(&c.Limits.StrictSecond, "strict-second", false, "also refuse (130429) a message that would make more than --rate in any one second, as a provider counting every one-second window")
	fs.DurationVar(&c.Limits.PairInterval, "pair-interval", sim.PairIntervalDefault, "sustained spacing of messages to one recipient (excess → 131056)")
	fs.IntVar(&c.Limits.PairBurst, "pair-burst", sim.PairBurstDefault, "messages to one recipient allowed within 6 s; a burst borrows future quota (n messages: nothing more until n×pair-interval after the first)")

	w := &c.Webhooks
	fs.StringVar(&w.URL, "webhook-url", "", "`URL` to POST status webhooks to (none when empty)")
	// The environment is read after parsing, not as the flag's default, so
	// that --help never prints the secret.
	fs.StringVar(&w.AppSecret, "app-secret", "", "app secret that signs webhooks (X-Hub-Signature-256); default $WAMUX_APP_SECRET")
	fs.DurationVar(&w.Delay.Min, "webhook-delay-min", 50*time.Millisecond, "shortest delay before each status (after acceptance, then after the previous status)")
	fs.DurationVar(&w.Delay.Max, "webhook-delay-max", 500*time.Millisecond, "longest delay before each status")
	fs.Float64Var(&w.ReadProbability, "read-prob", 0.5, "probability that a delivered message is also read")
	fs.Float64Var(&w.FailProbability, "fail-prob", 0, "probability that an accepted message fails instead of being delivered")
	fs.IntVar(&w.FailCode, "fail-code", 131049, "error code of failed statuses")
	fs.Float64Var(&w.SkipDeliveredProbability, "skip-delivered-prob", 0, "probability that a read message gets no delivered status (Meta skips it when delivery and reading coincide); the read then carries the pricing")
	fs.Float64Var(&w.FailAfterSentProbability, "fail-after-sent-prob", 0, "probability that a failed message first gets a sent status")
	fs.IntVar(&w.BatchSize, "webhook-batch", 1, "most statuses per webhook POST")
	fs.DurationVar(&w.BatchWait, "webhook-batch-wait", 20*time.Millisecond, "how long a partial batch waits for more statuses")
	fs.IntVar(&w.Concurrency, "webhook-concurrency", 4, "webhook POSTs in flight")
	fs.DurationVar(&w.Timeout, "webhook-timeout", 5*time.Second, "timeout of one webhook POST")
	fs.IntVar(&w.MaxAttempts, "webhook-max-attempts", 0, "attempts per webhook POST before giving up (0: no cap, retry for --webhook-retry-for)")
	fs.DurationVar(&w.RetryFor, "webhook-retry-for", 7*24*time.Hour, "how long a webhook POST not answered 200 is retried (Meta: 7 days)")
	fs.DurationVar(&w.RetryBase, "webhook-retry-base", time.Second, "first retry delay, doubled per attempt")
	fs.DurationVar(&w.RetryMax, "webhook-retry-max", time.Minute, "longest retry delay")
	fs.IntVar(&w.QueueSize, "webhook-queue", 1_000_000, "statuses queued at most; beyond, new ones are dropped and counted")

	f := &c.Faults
	fs.Float64Var(&f.ServerError, "fault-5xx", 0, "probability of a 500/503 answer (codes 131000/2) without accepting")
	fs.Float64Var(&f.SlowAccept, "fault-slow", 0, "probability of accepting, then answering only after --slow-delay (the ambiguous case)")
	fs.DurationVar(&f.SlowDelay, "slow-delay", sim.SlowDelayDefault, "how late a --fault-slow answer comes")
	fs.Float64Var(&f.Reset, "fault-reset", 0, "probability of resetting the connection without accepting")
	fs.Float64Var(&f.ResetAfterAccept, "fault-reset-after-accept", 0, "probability of accepting, then resetting the connection")
	fs.Float64Var(&f.ServerErrorAfterAccept, "fault-5xx-after-accept", 0, "probability of accepting (wamid, status webhooks, limits), then answering 500 with code 131000")
	fs.Func("fault-code", "answer with a Meta error without accepting, given as `code=probability`, e.g. 131048=0.01 (repeatable)", func(v string) error {
		k, p, ok := strings.Cut(v, "=")
		code, err1 := strconv.Atoi(k)
		prob, err2 := strconv.ParseFloat(p, 64)
		if !ok || err1 != nil || err2 != nil {
			return errors.New("want code=probability")
		}
		if f.Codes == nil {
			f.Codes = map[int]float64{}
		}
		f.Codes[code] = prob
		return nil
	})
	fs.DurationVar(&f.RetryAfter, "retry-after", 0, "add a Retry-After header of this duration to rate-limit and injected errors (0: none, as Meta)")
	fs.DurationVar(&f.Latency.Min, "latency-min", 0, "shortest added latency of every answer")
	fs.DurationVar(&f.Latency.Max, "latency-max", 0, "longest added latency of every answer")
	fs.DurationVar(&f.Jitter, "jitter", 0, "hold every request a random time up to this long before it is counted against the limits (network jitter on the way in)")
	fs.Float64Var(&f.WebhookDuplicate, "fault-dup-webhook", 0, "probability that a status webhook is sent twice")
	fs.Float64Var(&f.WebhookReorder, "fault-reorder-webhook", 0, "probability that a message's statuses arrive in reverse order (read before delivered, sent last)")
	fs.Float64Var(&f.Paced, "fault-paced", 0, "probability that a template send is paced: answered \"message_status\":\"held_for_quality_assessment\" (still accepted, counted against the limits), its statuses held for --paced-hold")
	fs.DurationVar(&f.PacedHold, "paced-hold", sim.PacedHoldDefault, "extra delay before a paced message's first status")
	fs.Float64Var(&f.PacedDrop, "paced-drop", 0, "probability that a paced message is dropped after the hold: it never gets a status webhook")

	fs.Float64Var(&c.Inbound.Rate, "inbound-rate", 0, "messages per second that users write to each number on their own, in a mix of types (text, media, location, contacts, replies to the number's messages); 0 for none")
	fs.IntVar(&c.Inbound.Customers, "inbound-customers", sim.InboundCustomersDefault, "users per number that the --inbound-rate messages come from")
	fs.BoolVar(&c.ServiceWindow, "service-window", false, "enforce Meta's 24 h customer-service window: a send other than a template to a user who has not written to the number within 24 h is accepted, then gets a failed status with code 131047 (default false: every send is delivered)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed for fault and webhook draws (same seed, same sequential run)")
	fs.IntVar(&c.MaxRecords, "max-records", sim.MaxRecordsDefault, "accepted messages kept for /sim/messages (counting goes on beyond)")
	return fs, o
}

// runSim runs the simulator until ctx is cancelled.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, o := simFlags(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "wamux sim: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.badNumbers > 0 {
		fmt.Fprintf(stderr, "wamux sim: -number wants phone_number_id:access_token; %d value(s) are not (not shown: they may hold a token)\n", o.badNumbers)
		return 2
	}
	if o.cfg.Webhooks.AppSecret == "" {
		o.cfg.Webhooks.AppSecret = os.Getenv("WAMUX_APP_SECRET")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(stderr, "wamux sim: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o.cfg.Logger = log
	if o.cfg.Faults.Latency.Max < o.cfg.Faults.Latency.Min {
		o.cfg.Faults.Latency.Max = o.cfg.Faults.Latency.Min
	}

	if o.gogc > 0 && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(o.gogc)
	}
	s, err := sim.New(o.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "wamux sim: %v\n", err)
		return 2
	}
	defer s.Close()
	if o.pprof {
		s.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
		s.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	}
	url, err := s.Start(ctx, o.listen)
	if err != nil {
		fmt.Fprintf(stderr, "wamux sim: %v\n", err)
		return 1
	}
	// Scripts and tests read this line to find the port when listening on :0.
	fmt.Fprintf(stdout, "wamux sim: listening on %s\n", url)
	for _, n := range o.cfg.Numbers {
		fmt.Fprintf(stdout, "wamux sim: number %s at %s/%s/%s/messages\n", n.PhoneNumberID, url, "v24.0", n.PhoneNumberID)
	}
	if len(o.cfg.Numbers) == 0 {
		fmt.Fprintln(stdout, "wamux sim: no numbers yet; add some with --number id:token or POST /sim/numbers")
	}
	if o.cfg.Webhooks.URL != "" && o.cfg.Webhooks.AppSecret == "" {
		log.Warn("webhooks are unsigned: no --app-secret or WAMUX_APP_SECRET")
	}
	<-ctx.Done()
	log.Info("sim: shutting down")
	return 0
}
