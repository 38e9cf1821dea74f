package cloudapi_test

import (
	"context"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// Send one message through a simulator on a free port and act on the
// outcome, as the dispatcher's retry loop does.
func ExampleClient_Send() {
	s, _ := sim.New(sim.Config{Numbers: []sim.Number{{PhoneNumberID: "1001", AccessToken: "token-1"}}})
	defer s.Close()
	ctx := context.Background()
	url, _ := s.Start(ctx, "127.0.0.1:0")

	c, _ := cloudapi.New(cloudapi.Config{})
	defer c.Close()
	dest := cloudapi.Destination{BaseURL: url, PhoneNumberID: "1001", AccessToken: "token-1"}
	msg := wamux.Message{ID: "msg-1", To: "15551234567", Type: "text", Payload: []byte(`{"body":"hello"}`)}

	r := c.Send(ctx, dest, msg)
	switch r.Outcome {
	case cloudapi.Accepted:
		fmt.Println("accepted; sim recorded callback data", s.Messages("1001", "")[0].CallbackData)
	case cloudapi.Unknown:
		fmt.Println("maybe sent: wait for a status carrying msg-1 before resending")
	default:
		fmt.Printf("%s, try again in %s\n", r.Outcome, r.Delay)
	}
	// Output: accepted; sim recorded callback data msg-1
}
