package sim

import "testing"

func BenchmarkParseSend(b *testing.B) {
	body := []byte(`{"messaging_product":"whatsapp","recipient_type":"individual","to":"15551234567","type":"text","text":{"preview_url":false,"body":"Your order has shipped."},"biz_opaque_callback_data":"bench-1-1"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := parseSend(body); e != nil {
			b.Fatal(e.message)
		}
	}
}
