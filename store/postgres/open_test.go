package postgres_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store/postgres"
)

// TestConcurrentOpen starts several stores on one new schema at once: the
// advisory lock must let exactly one of them create it and apply the
// migrations, and the others must find it done.
func TestConcurrentOpen(t *testing.T) {
	first := newStore(t) // owns the schema's cleanup
	dsn := testDSN(t)
	var schema string
	if err := first.Pool().QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	other := schema + "_b"
	t.Cleanup(func() {
		_, _ = first.Pool().Exec(context.Background(), "DROP SCHEMA IF EXISTS "+other+" CASCADE")
	})
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*postgres.Store, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(t.Context(), dsn, postgres.Options{Schema: other})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var applied int
	if err := stores[0].Pool().QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(files) {
		t.Fatalf("schema_migrations has %d rows, want %d (one per migration, applied once)", applied, len(files))
	}
	// Schemas isolate: an account in one is not visible in the other.
	if _, err := stores[0].CreateAccount(t.Context(), wamux.Account{ID: "a", PhoneNumberID: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.GetAccount(t.Context(), "a"); wamux.ErrorCode(err) != wamux.ENotFound {
		t.Fatalf("account leaked across schemas: %v", err)
	}
}

// TestUnavailable checks that a server that does not answer and an expired
// deadline both come back as "unavailable", with the cause still
// recognisable and no password in the message.
func TestUnavailable(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://wamux:s3cretpw@127.0.0.1:1/none?connect_timeout=2", postgres.Options{})
	if err == nil {
		t.Fatal("open against a closed port succeeded")
	}
	if !postgres.IsUnavailable(err) || wamux.ErrorCode(err) != wamux.EUnavailable {
		t.Fatalf("closed port: %v (code %q), want unavailable", err, wamux.ErrorCode(err))
	}
	if strings.Contains(err.Error(), "s3cretpw") || strings.Contains(wamux.ErrorMessage(err), "127.0.0.1") {
		t.Fatalf("error leaks connection details: %v / %q", err, wamux.ErrorMessage(err))
	}

	s := newStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 0)
	defer cancel()
	<-ctx.Done()
	_, err = s.GetAccount(ctx, "a")
	if !errors.Is(err, context.DeadlineExceeded) || !postgres.IsUnavailable(err) {
		t.Fatalf("expired deadline: %v, want DeadlineExceeded and unavailable", err)
	}
	if err := s.PutSettings(ctx, map[string]string{"k": "v"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write with expired deadline: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); !postgres.IsUnavailable(err) {
		t.Fatalf("ping after close: %v, want unavailable", err)
	}
}

func TestInvalidSchema(t *testing.T) {
	_, err := postgres.Open(t.Context(), testDSN(t), postgres.Options{Schema: "x; DROP TABLE y"})
	if wamux.ErrorCode(err) != wamux.EInvalid {
		t.Fatalf("bad schema name: %v, want invalid", err)
	}
}

// TestServerTimeoutsUnavailable checks that the server giving up on a
// statement under its own limits (statement_timeout, lock_timeout), as an
// operator may configure them, is "unavailable" like a client deadline:
// retrying later can succeed, the request was not at fault.
func TestServerTimeoutsUnavailable(t *testing.T) {
	dsn := testDSN(t)
	for _, param := range []string{"statement_timeout", "lock_timeout"} {
		t.Run(param, func(t *testing.T) {
			admin, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close(context.Background())
			// The schema is made without the limit, then opened with it.
			schema := randomSchema(t)
			s, err := postgres.Open(t.Context(), dsn, postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
					t.Error(err)
				}
			}()
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set(param, "300")
			u.RawQuery = q.Encode()
			s, err = postgres.Open(t.Context(), u.String(), postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Another session holds the messages table until the calls
			// below have failed.
			tx, err := admin.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(t.Context(), "LOCK TABLE "+schema+".messages IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			_, err = s.GetMessage(t.Context(), "m1")
			if wamux.ErrorCode(err) != wamux.EUnavailable {
				t.Errorf("GetMessage: %v (code %q), want unavailable", err, wamux.ErrorCode(err))
			}
			_, err = s.InsertMessages(t.Context(), []wamux.Message{{ID: "m1", AccountID: "acc1", ContentHash: "h"}})
			if wamux.ErrorCode(err) != wamux.EUnavailable {
				t.Errorf("InsertMessages: %v (code %q), want unavailable", err, wamux.ErrorCode(err))
			}
			if err := tx.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenSilentServerTimesOut: a server that accepts the connection and
// never answers (a hung PostgreSQL, a proxy with nothing behind it) makes
// Open fail within ConnectTimeoutDefault when the store URL sets no
// connect_timeout, as pgx alone would wait for ever: `wamux serve` hung at
// start without a word.
func TestOpenSilentServerTimesOut(t *testing.T) {
	t.Parallel() // it waits out the real connect timeout and uses no database
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})

	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := postgres.Open(t.Context(), "postgres://wamux:s3cretpw@"+ln.Addr().String()+"/none", postgres.Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("open against a silent server succeeded")
		}
		if !postgres.IsUnavailable(err) || strings.Contains(err.Error(), "s3cretpw") {
			t.Fatalf("silent server: %v, want unavailable without the password", err)
		}
		if took := time.Since(start); took > postgres.ConnectTimeoutDefault+5*time.Second {
			t.Fatalf("open took %v, want about %v", took, postgres.ConnectTimeoutDefault)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Open still waiting for a silent server after 30s")
	}
}
