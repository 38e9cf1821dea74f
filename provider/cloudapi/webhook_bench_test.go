package cloudapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wamux/wamux/provider/cloudapi"
)

// statusItem is the i-th status of a batch, in the shape of a delivered
// receipt with conversation and pricing.
func statusItem(i int) string {
	return fmt.Sprintf(`{"id":"wamid.HBgLMTY1MDU1NTEyMzQVAgARGBI%06dQjg2RkZBRjRCAA==","status":"delivered","timestamp":"17500300%02d",`+
		`"recipient_id":"16505551234","biz_opaque_callback_data":"0190f3c2-6a1e-7b3a-9c44-%012d",`+
		`"conversation":{"id":"6ceb9d929c1e9b1f2e6a3d1c0b7a4f%02d","expiration_timestamp":"1750116475","origin":{"type":"utility"}},`+
		`"pricing":{"billable":true,"pricing_model":"PMP","type":"regular","category":"utility"}}`, i, i%100, i, i%100)
}

// statusBody is a notification carrying n statuses of one number.
func statusBody(n int) []byte {
	items := make([]string, n)
	for i := range items {
		items[i] = statusItem(i)
	}
	return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{` +
		`"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},` +
		`"statuses":[` + strings.Join(items, ",") + `]},"field":"messages"}]}]}`)
}

var inboundBody = []byte(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{` +
	`"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},` +
	`"contacts":[{"profile":{"name":"Sheena Nelson"},"wa_id":"16505551234"}],` +
	`"messages":[{"from":"16505551234","id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=","timestamp":"1749416383",` +
	`"type":"text","text":{"body":"Does it come in another color? I would like the blue one, size M, delivered by Friday."}}]},"field":"messages"}]}]}`)

// BenchmarkParseWebhook decodes notifications of the shapes Meta sends:
// one status, batches of statuses, one inbound text message.
func BenchmarkParseWebhook(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"status1", statusBody(1)},
		{"status10", statusBody(10)},
		{"status100", statusBody(100)},
		{"inbound", inboundBody},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cloudapi.ParseWebhook(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
