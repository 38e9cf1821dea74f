package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/store"
)

const childAppSecret = "child-app-secret-0123456789"

// startWebhookChild runs `wamux serve` on dataDir with an app secret, so
// it takes signed webhooks.
func startWebhookChild(t *testing.T, dir, dataDir string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WAMUX_TEST_RUN_MAIN=1", "WAMUX_API_KEYS="+childKey, "WAMUX_SECRET_KEY="+childSecretKey, "WAMUX_APP_SECRET="+childAppSecret)
	return startCmd(t, cmd)
}

// TestKill9WebhookStatusesSurvive: signed status webhooks arrive from many
// clients; the gateway is killed with SIGKILL mid-flood. Every status it
// answered 200 must be stored and merged once it has started again (the
// receipt log's entries are processed at start), and the log left empty.
func TestKill9WebhookStatusesSurvive(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	c := startWebhookChild(t, dir, dataDir)
	const account, phone = "acc-kill", "106540352240001"
	if code, body, err := c.request("POST", "/v1/accounts", childKey,
		fmt.Sprintf(`{"id":%q,"phone_number_id":%q,"access_token":"tok-kill"}`, account, phone)); err != nil || code != 201 {
		t.Fatalf("create account: %d %s %v", code, body, err)
	}

	ts := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Unix()
	acked := floodThenKill(t, c, 16, 1500, func(ctx context.Context, w, i int) (string, bool, error) {
		wamid := fmt.Sprintf("wamid.KILL%02d%06d", w, i)
		// Two statuses per notification: the merge must keep the stronger
		// one whatever order they are processed in.
		body := []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages",`+
			`"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"1555","phone_number_id":%q},"statuses":[`+
			`{"id":%q,"status":"delivered","timestamp":"%d","recipient_id":"16505550000"},`+
			`{"id":%q,"status":"sent","timestamp":"%d","recipient_id":"16505550000"}]}}]}]}`,
			phone, wamid, ts+1, wamid, ts))
		req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/webhook", bytes.NewReader(body))
		if err != nil {
			return "", false, err
		}
		req.Header.Set(cloudapi.SignatureHeader, cloudapi.Sign(body, childAppSecret))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", false, err
		}
		res.Body.Close()
		return wamid, res.StatusCode == http.StatusOK, nil
	})

	// Start again: the receipts left in the log are processed before it
	// listens; then stop it the normal way.
	c2 := startWebhookChild(t, dir, dataDir)
	if err := c2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c2.wait(t); code != 0 {
		t.Fatalf("restarted gateway exited %d\n%s", code, c2.stderr.String())
	}

	st := openData(t, dataDir)
	defer st.Close()
	bg := context.Background()
	keys := make([]store.StateKey, len(acked))
	for i, wamid := range acked {
		keys[i] = store.StateKey{AccountID: account, MessageID: wamid}
		rs, err := st.ListReceipts(bg, account, wamid)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("%s was acknowledged with 2 statuses; %d stored after kill -9 and restart", wamid, len(rs))
		}
	}
	states, err := st.GetStates(bg, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if s, ok := states[k]; !ok || s.Type != wamux.ReceiptDelivered {
			t.Fatalf("%s: merged state %+v (found %v), want delivered", k.MessageID, s, ok)
		}
	}
	left, err := st.ListReceiptLog(bg, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the receipt log still holds %d receipts after a clean stop", len(left))
	}
	t.Logf("%d acknowledged notifications (%d statuses) survived kill -9", len(acked), 2*len(acked))
}
