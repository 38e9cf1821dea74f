package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EdgeConfig describes the two attacks on the gateway's edge: slow webhook
// bodies with a bad signature, and many idle keep-alive connections. Each
// phase runs against its own `wamux serve` child process, so that the
// peak RSS (VmHWM) and the open files are the gateway's alone, not the
// attacking clients'.
type EdgeConfig struct {
	// Serve is the command line that runs the wamux binary.
	Serve []string
	// Env is added to the children's environment.
	Env []string
	// GatewayNoFile is the children's open-file limit (soft and hard);
	// zero leaves them this process's.
	GatewayNoFile int

	// Idle is how long /healthz is probed on an idle gateway first.
	Idle time.Duration
	// ProbeEvery is the interval of the /healthz probes, each on a new
	// connection, as a load balancer's health check.
	ProbeEvery time.Duration

	// SlowConns connections each send a BodyBytes webhook with a wrong
	// signature at BodyRate bytes/s, again one second after each answer,
	// for SlowDuration.
	SlowConns    int
	BodyBytes    int
	BodyRate     int
	SlowDuration time.Duration

	// IdleConns connections each send one GET /healthz and then hold the
	// connection open, idle, for IdleHold. MaxConnections is the gateway's
	// max_connections (0: its default, half its open-file limit);
	// Baseline repeats the phase with a cap far above the file limit.
	IdleConns      int
	IdleHold       time.Duration
	MaxConnections int
	Baseline       bool
}

// EdgeReport is what RunEdge measured.
type EdgeReport struct {
	// NoFileSoft and NoFileHard are this process's open-file limits, the
	// soft one raised to the hard one.
	NoFileSoft    uint64       `json:"nofile_soft"`
	NoFileHard    uint64       `json:"nofile_hard"`
	GatewayNoFile int          `json:"gateway_nofile"`
	SlowBody      *SlowPhase   `json:"slow_body"`
	Conns         []*ConnPhase `json:"connections"`
}

// Probes are /healthz latencies in ms; Failed counts probes without a 200
// within the probe timeout (counted at the timeout in the figures).
type Probes struct {
	N      int     `json:"n"`
	Failed int     `json:"failed"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	Max    float64 `json:"max_ms"`
}

// SlowPhase is the slow-body attack.
type SlowPhase struct {
	Conns       int         `json:"conns"`
	BodyBytes   int         `json:"body_bytes"`
	BodyRate    int         `json:"body_rate"`
	DurationSec float64     `json:"duration_sec"`
	IdleProbes  Probes      `json:"idle_probes"`
	IdleRSSMiB  float64     `json:"idle_rss_mib"`
	Probes      Probes      `json:"probes"`
	Answers     map[int]int `json:"answers"`      // by status code
	NoAnswer    int         `json:"no_answer"`    // connection failed or cut without an answer
	BytesSent   int64       `json:"bytes_sent"`   // by the attackers, all connections
	PeakRSSMiB  float64     `json:"peak_rss_mib"` // the gateway's VmHWM
	CPUSec      float64     `json:"cpu_sec"`      // the gateway's CPU time during the attack
}

// ConnPhase is the idle-connection attack at one max_connections.
type ConnPhase struct {
	MaxConnections int     `json:"max_connections"` // as configured; 0: the default
	Conns          int     `json:"conns"`
	IdleProbes     Probes  `json:"idle_probes"`
	RampProbes     Probes  `json:"ramp_probes"` // while the connections were being opened
	RampSec        float64 `json:"ramp_sec"`
	RampCPUSec     float64 `json:"ramp_cpu_sec"` // the gateway's CPU time while they were opened
	Probes         Probes  `json:"probes"`       // while they were held
	Held           int     `json:"held"`         // answered with keep-alive, left open
	Closed         int     `json:"closed"`       // answered with Connection: close
	Unanswered     int     `json:"unanswered"`   // connected, no answer within 10 s
	DialFailed     int     `json:"dial_failed"`  // no connection within 10 s
	OpenAtEnd      int     `json:"open_at_end"`  // of Held, still open after the hold
	PeakRSSMiB     float64 `json:"peak_rss_mib"`
	GatewayErrors  string  `json:"gateway_errors,omitempty"` // the child's log, first lines
}

const (
	edgeProbeTimeout  = 10 * time.Second
	edgeAnswerTimeout = 10 * time.Second
	edgeFileReserve   = 200 // files this process keeps for itself beside the attack's connections
)

// RunEdge raises this process's open-file soft limit to its hard limit,
// then runs the slow-body phase and the idle-connection phase(s).
func RunEdge(ctx context.Context, cfg EdgeConfig) (*EdgeReport, error) {
	if len(cfg.Serve) == 0 {
		return nil, errors.New("bench edge: the wamux command is required")
	}
	rep := &EdgeReport{GatewayNoFile: cfg.GatewayNoFile}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil, err
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil, fmt.Errorf("bench edge: raise the open-file limit: %w", err)
	}
	rep.NoFileSoft, rep.NoFileHard = lim.Cur, lim.Max
	if cfg.SlowConns > 0 {
		p, err := runSlowPhase(ctx, cfg)
		if err != nil {
			return nil, err
		}
		rep.SlowBody = p
	}
	if cfg.IdleConns > 0 {
		conns := min(cfg.IdleConns, int(min(lim.Cur, 1<<30))-edgeFileReserve)
		caps := []int{cfg.MaxConnections}
		if cfg.Baseline {
			caps = append(caps, 1_000_000)
		}
		for _, c := range caps {
			p, err := runConnPhase(ctx, cfg, conns, c)
			if err != nil {
				return nil, err
			}
			rep.Conns = append(rep.Conns, p)
		}
	}
	return rep, nil
}

// edgeGateway is a `wamux serve` child.
type edgeGateway struct {
	cmd    *exec.Cmd
	addr   string
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startEdgeGateway starts `wamux serve` on a fresh data directory with
// maxConns and waits until /readyz answers.
func startEdgeGateway(ctx context.Context, cfg EdgeConfig, maxConns int) (*edgeGateway, func(), error) {
	dir, err := os.MkdirTemp("", "wamux-edge-")
	if err != nil {
		return nil, nil, err
	}
	g := &edgeGateway{addr: FreePort(), stderr: &lockedBuffer{}}
	args := append(append([]string{}, cfg.Serve...), "serve", "--listen", g.addr, "--data-dir", dir)
	if cfg.GatewayNoFile > 0 {
		// The limit is set by a shell that then becomes the gateway, so
		// that it holds for the gateway alone.
		args = append([]string{"/bin/sh", "-c", `ulimit -n "$0" && shift && exec "$@"`, strconv.Itoa(cfg.GatewayNoFile), "--"}, args...)
	}
	g.cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	g.cmd.Env = append(append(os.Environ(), cfg.Env...), "WAMUX_API_KEYS=edge-"+randomHex(16), "WAMUX_APP_SECRET="+randomHex(16),
		"WAMUX_SECRET_KEY="+randomKey(), "WAMUX_LOG_LEVEL=warn", "WAMUX_MAX_CONNECTIONS="+strconv.Itoa(maxConns))
	g.cmd.Stderr = g.stderr
	g.cmd.Stdout = io.Discard
	stop := func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = g.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = g.cmd.Process.Kill()
			<-done
		}
		os.RemoveAll(dir)
	}
	if err := g.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("bench edge: start serve: %w", err)
	}
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := client.Get("http://" + g.addr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return g, stop, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, nil, fmt.Errorf("bench edge: gateway not ready: %s", strings.TrimSpace(g.stderr.String()))
		}
		time.Sleep(10 * time.Millisecond) // polling a child process's readiness
	}
}

// probe GETs /healthz on a new connection every cfg.ProbeEvery until ctx
// ends.
func probe(ctx context.Context, addr string, every time.Duration) Probes {
	client := &http.Client{Timeout: edgeProbeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		lats []float64
		fail int
	)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return probeStats(lats, fail)
		case <-tick.C:
		}
		// A probe that waits does not delay the next: a health checker
		// keeps its own schedule.
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			res, err := client.Get("http://" + addr + "/healthz")
			ok := err == nil && res.StatusCode == http.StatusOK
			if err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				fail++
				d = max(d, edgeProbeTimeout)
			}
			lats = append(lats, float64(d.Microseconds())/1000)
		}()
	}
}

func probeStats(lats []float64, failed int) Probes {
	p := Probes{N: len(lats), Failed: failed}
	if len(lats) == 0 {
		return p
	}
	slices.Sort(lats)
	at := func(q float64) float64 { return lats[min(len(lats)-1, int(q*float64(len(lats))))] }
	p.P50, p.P95, p.Max = at(0.5), at(0.95), lats[len(lats)-1]
	return p
}

// probeIdle probes an idle gateway for cfg.Idle.
func probeIdle(ctx context.Context, cfg EdgeConfig, addr string) Probes {
	ctx, cancel := context.WithTimeout(ctx, cfg.Idle)
	defer cancel()
	return probe(ctx, addr, cfg.ProbeEvery)
}

// runSlowPhase runs the slow-body attack against a fresh gateway with its
// default connection cap.
func runSlowPhase(ctx context.Context, cfg EdgeConfig) (*SlowPhase, error) {
	g, stop, err := startEdgeGateway(ctx, cfg, 0)
	if err != nil {
		return nil, err
	}
	defer stop()
	p := &SlowPhase{Conns: cfg.SlowConns, BodyBytes: cfg.BodyBytes, BodyRate: cfg.BodyRate,
		DurationSec: cfg.SlowDuration.Seconds(), Answers: map[int]int{}}
	p.IdleProbes = probeIdle(ctx, cfg, g.addr)
	p.IdleRSSMiB = procStatusMiB(g.cmd.Process.Pid, "VmRSS:")

	cpu0 := procCPUSec(g.cmd.Process.Pid)
	attack, cancel := context.WithTimeout(ctx, cfg.SlowDuration)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		sent atomic.Int64
	)
	// A well-formed signature the gateway checks only once it has read
	// and hashed the whole body.
	sig := "sha256=" + strings.Repeat("0", 64)
	for range cfg.SlowConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attack.Err() == nil {
				status := slowBody(attack, g.addr, sig, cfg.BodyBytes, cfg.BodyRate, &sent)
				mu.Lock()
				if status > 0 {
					p.Answers[status]++
				} else if attack.Err() == nil {
					p.NoAnswer++
				}
				mu.Unlock()
				select {
				case <-attack.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	p.Probes = probe(attack, g.addr, cfg.ProbeEvery)
	wg.Wait()
	p.BytesSent, p.CPUSec = sent.Load(), procCPUSec(g.cmd.Process.Pid)-cpu0
	p.PeakRSSMiB = procStatusMiB(g.cmd.Process.Pid, "VmHWM:")
	return p, nil
}

// slowBody posts one webhook of n bytes at rate bytes/s and returns the
// answer's status, or 0 when none came.
func slowBody(ctx context.Context, addr, sig string, n, rate int, sent *atomic.Int64) int {
	var d net.Dialer
	dialCtx, cancel := context.WithTimeout(ctx, edgeAnswerTimeout)
	conn, err := d.DialContext(dialCtx, "tcp", addr)
	cancel()
	if err != nil {
		return 0
	}
	defer conn.Close()
	stopOnEnd := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopOnEnd()
	head := "POST /webhook HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(n) + "\r\nX-Hub-Signature-256: " + sig + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		return 0
	}
	answer := make(chan int, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answer <- 0
			return
		}
		res.Body.Close()
		answer <- res.StatusCode
	}()
	const chunk = 16 << 10
	buf := bytes.Repeat([]byte(" "), chunk)
	tick := time.NewTicker(time.Duration(float64(time.Second) * chunk / float64(rate)))
	defer tick.Stop()
	for left := n; left > 0; {
		select {
		case s := <-answer: // answered before the whole body was sent
			return s
		case <-tick.C:
		}
		k := min(left, chunk)
		_ = conn.SetWriteDeadline(time.Now().Add(edgeAnswerTimeout))
		if _, err := conn.Write(buf[:k]); err != nil {
			break
		}
		sent.Add(int64(k))
		left -= k
	}
	_ = conn.SetReadDeadline(time.Now().Add(edgeAnswerTimeout))
	return <-answer
}

// runConnPhase opens conns idle keep-alive connections against a fresh
// gateway capped at maxConns and probes /healthz meanwhile.
func runConnPhase(ctx context.Context, cfg EdgeConfig, conns, maxConns int) (*ConnPhase, error) {
	g, stop, err := startEdgeGateway(ctx, cfg, maxConns)
	if err != nil {
		return nil, err
	}
	defer stop()
	p := &ConnPhase{MaxConnections: maxConns, Conns: conns}
	p.IdleProbes = probeIdle(ctx, cfg, g.addr)

	phase, cancel := context.WithCancel(ctx)
	defer cancel()
	ramp, endRamp := context.WithCancel(phase)
	defer endRamp()
	rampProbes := make(chan Probes, 1)
	go func() { rampProbes <- probe(ramp, g.addr, cfg.ProbeEvery) }()
	start, cpu0 := time.Now(), procCPUSec(g.cmd.Process.Pid)

	var (
		mu   sync.Mutex
		held []net.Conn
		next atomic.Int64
		wg   sync.WaitGroup
	)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// Enough dialers that connections waiting for an answer (in the
	// listen backlog, or not accepted at all) do not slow the others.
	for range min(conns, 2048) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(conns) && phase.Err() == nil {
				c, outcome := idleConn(phase, g.addr)
				mu.Lock()
				switch outcome {
				case connHeld:
					p.Held++
					held = append(held, c)
				case connClosed:
					p.Closed++
				case connUnanswered:
					p.Unanswered++
				case connDialFailed:
					p.DialFailed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.RampSec, p.RampCPUSec = time.Since(start).Seconds(), procCPUSec(g.cmd.Process.Pid)-cpu0
	endRamp()
	p.RampProbes = <-rampProbes
	hold, endHold := context.WithTimeout(phase, cfg.IdleHold)
	p.Probes = probe(hold, g.addr, cfg.ProbeEvery)
	endHold()
	cancel()
	for _, c := range held {
		if stillOpen(c) {
			p.OpenAtEnd++
		}
	}
	p.PeakRSSMiB = procStatusMiB(g.cmd.Process.Pid, "VmHWM:")
	p.GatewayErrors = firstLines(g.stderr.String(), 3)
	return p, nil
}

type connOutcome int

const (
	connHeld connOutcome = iota
	connClosed
	connUnanswered
	connDialFailed
)

// idleConn connects, asks GET /healthz and returns the connection if the
// gateway keeps it open after answering.
func idleConn(ctx context.Context, addr string) (net.Conn, connOutcome) {
	var d net.Dialer
	dialCtx, cancel := context.WithTimeout(ctx, edgeAnswerTimeout)
	c, err := d.DialContext(dialCtx, "tcp", addr)
	cancel()
	if err != nil {
		return nil, connDialFailed
	}
	_ = c.SetDeadline(time.Now().Add(edgeAnswerTimeout))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"); err != nil {
		c.Close()
		return nil, connUnanswered
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, connUnanswered
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.Close {
		c.Close()
		return nil, connClosed
	}
	_ = c.SetDeadline(time.Time{})
	return c, connHeld
}

// stillOpen reports whether the gateway has not closed c.
func stillOpen(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// procStatusMiB reads a kB field of /proc/<pid>/status in MiB (0 where
// there is none).
func procStatusMiB(pid int, field string) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// procCPUSec is a process's user and system CPU time in seconds, from
// /proc/<pid>/stat (0 where there is none).
func procCPUSec(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th of them.
	i := bytes.LastIndexByte(raw, ')')
	f := strings.Fields(string(raw[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
