package sim_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/wamux/wamux/sim"
)

// BenchmarkHandleSend measures the handler alone (no network): parsing,
// validation, limits and recording of one accepted text message.
func BenchmarkHandleSend(b *testing.B) {
	s, err := sim.New(sim.Config{
		Numbers: []sim.Number{{PhoneNumberID: num, AccessToken: token}},
		Limits:  sim.Limits{Rate: 1e9},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			body := fmt.Sprintf(`{"messaging_product":"whatsapp","recipient_type":"individual","to":"1%012d","type":"text","text":{"preview_url":false,"body":"Your order has shipped."},"biz_opaque_callback_data":"b-%d"}`, i, i)
			req := httptest.NewRequest(http.MethodPost, "/v24.0/"+num+"/messages", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			if w.Code != 200 {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
		}
	})
}
