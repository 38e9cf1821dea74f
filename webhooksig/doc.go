// Package webhooksig signs and verifies webhooks as the Standard Webhooks
// specification (https://www.standardwebhooks.com) defines them: the sender
// puts webhook-id, webhook-timestamp and webhook-signature on each request,
// the signature being "v1," and the base64 HMAC-SHA256, under the endpoint's
// whsec_ secret, of "<id>.<unix seconds>.<body>".
//
// It depends on the standard library only, so a receiver written in Go can
// import it to check what wamux sends.
package webhooksig
