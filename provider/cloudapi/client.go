package cloudapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/wamux/wamux"
)

// Defaults for Config. The timeout is generous because every timeout is an
// ambiguous outcome that costs a compensation round (reference §7).
const (
	VersionDefault             = "v24.0"
	TimeoutDefault             = 30 * time.Second
	DialTimeoutDefault         = 5 * time.Second
	MaxIdleConnsPerHostDefault = 256
	IdleConnTimeoutDefault     = 90 * time.Second
	MaxResponseBytesDefault    = 1 << 20
	// MaxCallbackData is Meta's limit on biz_opaque_callback_data.
	MaxCallbackData = 512
)

// Config configures a Client. Zero fields take the XxxDefault values.
type Config struct {
	// Version is the Graph API version in the path, e.g. "v24.0".
	Version string
	// Timeout bounds one whole attempt: connect, send, and read the answer.
	Timeout time.Duration
	// DialTimeout bounds connecting; a dial failure is a certain Retry.
	DialTimeout time.Duration
	// MaxIdleConnsPerHost is the keep-alive pool per host. All accounts
	// usually share graph.facebook.com, so it is sized for all of them.
	MaxIdleConnsPerHost int
	// MaxConnsPerHost caps connections per host; 0 means no cap.
	MaxConnsPerHost int
	// IdleConnTimeout closes keep-alive connections unused this long.
	IdleConnTimeout time.Duration
	// MaxResponseBytes caps how much of a response body is read.
	MaxResponseBytes int64
	// Transport replaces the built-in pooled transport (tests, proxies).
	Transport http.RoundTripper
	// UserAgent is sent on every request; default "wamux".
	UserAgent string
}

// Destination is where one account sends: the API host, the business
// phone number id and its bearer token.
type Destination struct {
	// BaseURL is the API root, e.g. "https://graph.facebook.com" or a
	// simulator's URL; empty means wamux.DefaultBaseURL.
	BaseURL       string
	PhoneNumberID string
	AccessToken   string
}

// String omits the token so that a Destination printed by mistake is safe.
func (d Destination) String() string {
	return fmt.Sprintf("Destination{BaseURL:%s PhoneNumberID:%s}", d.BaseURL, d.PhoneNumberID)
}

// GoString keeps %#v as safe as %v.
func (d Destination) GoString() string { return d.String() }

// LogValue keeps the token out of slog's JSON handler, which ignores
// String and writes every field.
func (d Destination) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", d.BaseURL), slog.String("phone_number_id", d.PhoneNumberID))
}

// DestinationOf is the destination of a wamux account.
func DestinationOf(a wamux.Account) Destination {
	return Destination{BaseURL: a.BaseURL, PhoneNumberID: a.PhoneNumberID, AccessToken: a.AccessToken}
}

// Client sends messages to the Cloud API. It is safe for concurrent use and
// meant to be shared by every account: one transport, one pool.
type Client struct {
	cfg  Config
	http *http.Client
}

// New builds a Client, filling defaults.
func New(cfg Config) (*Client, error) {
	if cfg.Version == "" {
		cfg.Version = VersionDefault
	}
	if !versionRE.MatchString(cfg.Version) {
		return nil, fmt.Errorf("cloudapi: version %q is not like v24.0", cfg.Version)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DialTimeoutDefault
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = MaxIdleConnsPerHostDefault
	}
	if cfg.IdleConnTimeout <= 0 {
		cfg.IdleConnTimeout = IdleConnTimeoutDefault
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = MaxResponseBytesDefault
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "wamux"
	}
	rt := cfg.Transport
	if rt == nil {
		rt = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          cfg.MaxIdleConnsPerHost * 4,
			MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
			MaxConnsPerHost:       cfg.MaxConnsPerHost,
			IdleConnTimeout:       cfg.IdleConnTimeout,
			TLSHandshakeTimeout:   cfg.DialTimeout,
			ExpectContinueTimeout: time.Second,
		}
	}
	return &Client{cfg: cfg, http: &http.Client{Transport: rt, Timeout: cfg.Timeout}}, nil
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

var (
	versionRE = regexp.MustCompile(`^v[0-9]{1,3}(\.[0-9]{1,3})?$`)
	typeRE    = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)
)

// Send makes one attempt to send msg through dest and classifies the
// result. It does not retry: the Outcome says whether and when to.
// msg.ID goes out as biz_opaque_callback_data, so that status webhooks
// (and compensation after an Unknown) can be matched to our message.
func (c *Client) Send(ctx context.Context, dest Destination, msg wamux.Message) Result {
	body, err := Body(msg)
	if err != nil {
		return Result{Outcome: Permanent, Code: -1, Reason: wamux.ErrorMessage(err), Err: err}
	}
	status, data, header, early := c.post(ctx, dest, body, "send message")
	if early != nil {
		return *early
	}
	return classifyAnswer(dest, status, data, header)
}

// classifyAnswer classifies a whole answer of dest. Its Reason holds only
// what Classify parses from Meta's error envelope (code, message,
// details), never the body itself; and a provider that echoes the access
// token there does not get it stored, even cut off at the end.
func classifyAnswer(dest Destination, status int, data []byte, header http.Header) Result {
	r := Classify(status, data, header, nil)
	tok := dest.AccessToken
	if tok == "" {
		return r
	}
	r.Reason = strings.ReplaceAll(r.Reason, tok, "[redacted]")
	const minPrefix = 6
	for n := len(tok) - 1; n >= minPrefix; n-- {
		if strings.HasSuffix(r.Reason, tok[:n]) {
			r.Reason = r.Reason[:len(r.Reason)-n] + "[redacted]"
			break
		}
	}
	return r
}

// MarkRead makes one attempt to mark the inbound message wamid as read
// (Meta shows the customer blue ticks) and classifies the result as Send
// does; Accepted means Meta answered success.
func (c *Client) MarkRead(ctx context.Context, dest Destination, wamid string) Result {
	if wamid == "" {
		err := wamux.Errorf(wamux.EInvalid, "marking a message read needs its wamid")
		return Result{Outcome: Permanent, Code: -1, Reason: err.Message, Err: err}
	}
	id, _ := json.Marshal(wamid)
	body := append(append([]byte(`{"messaging_product":"whatsapp","status":"read","message_id":`), id...), '}')
	status, data, header, early := c.post(ctx, dest, body, "mark read")
	if early != nil {
		return *early
	}
	if status >= 200 && status < 300 {
		var ok struct {
			Success bool `json:"success"`
		}
		if json.Unmarshal(data, &ok) == nil && ok.Success {
			return Result{Outcome: Accepted, HTTPStatus: status, Code: -1}
		}
	}
	return classifyAnswer(dest, status, data, header)
}

// post makes one POST of body to dest's messages endpoint and returns the
// answer; early is the classified result when there is no whole answer
// to classify (no destination, no connection, a body cut off).
func (c *Client) post(ctx context.Context, dest Destination, body []byte, doing string) (status int, data []byte, header http.Header, early *Result) {
	if dest.PhoneNumberID == "" || dest.AccessToken == "" {
		err := wamux.Errorf(wamux.EInvalid, "destination needs a phone number id and an access token")
		return 0, nil, nil, &Result{Outcome: Disable, Code: -1, Reason: err.Message, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, nil, &Result{Outcome: Retry, Code: -1, Delay: 0, Reason: "not sent: " + err.Error(), Err: fmt.Errorf("%w: %w", errNotSent, err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint(dest), bytes.NewReader(body))
	if err != nil {
		err = fmt.Errorf("%w: build request: %w", errNotSent, redact(err, dest.AccessToken))
		return 0, nil, nil, &Result{Outcome: Disable, Code: -1, Reason: "bad base url", Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+dest.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)

	resp, err := c.http.Do(req)
	if err != nil {
		r := Classify(0, nil, nil, fmt.Errorf("%s: %w", doing, redact(err, dest.AccessToken)))
		return 0, nil, nil, &r
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes))
	if err != nil {
		r := Classify(resp.StatusCode, data, resp.Header, fmt.Errorf("read response: %w", redact(err, dest.AccessToken)))
		return 0, nil, nil, &r
	}
	return resp.StatusCode, data, resp.Header, nil
}

func (c *Client) endpoint(dest Destination) string {
	base := dest.BaseURL
	if base == "" {
		base = wamux.DefaultBaseURL
	}
	return strings.TrimRight(base, "/") + "/" + c.cfg.Version + "/" + url.PathEscape(dest.PhoneNumberID) + "/messages"
}

// Body is the JSON Meta expects for msg: messaging_product, recipient,
// type, the type's object (msg.Payload, passed through) and msg.ID as the
// callback data. It fails, with a domain error, on what Meta would reject
// for certain, so such a message never costs a request.
func Body(msg wamux.Message) ([]byte, error) {
	if msg.To == "" {
		return nil, wamux.Errorf(wamux.EInvalid, "message has no recipient")
	}
	if !typeRE.MatchString(msg.Type) {
		return nil, wamux.Errorf(wamux.EInvalid, "message type %q is not a Cloud API type", msg.Type)
	}
	payload := bytes.TrimSpace(msg.Payload)
	if len(payload) == 0 || payload[0] != '{' || !json.Valid(payload) {
		return nil, wamux.Errorf(wamux.EInvalid, "message payload for type %q must be a JSON object", msg.Type)
	}
	if len(msg.ID) > MaxCallbackData {
		return nil, wamux.Errorf(wamux.EInvalid, "msg_id longer than %d bytes cannot be callback data", MaxCallbackData)
	}
	to, _ := json.Marshal(msg.To)
	id, _ := json.Marshal(msg.ID)
	var b bytes.Buffer
	b.Grow(len(payload) + len(to) + len(id) + 2*len(msg.Type) + 128)
	b.WriteString(`{"messaging_product":"whatsapp","recipient_type":"individual","to":`)
	b.Write(to)
	b.WriteString(`,"type":"`)
	b.WriteString(msg.Type) // typeRE keeps it free of characters needing escapes
	b.WriteString(`","`)
	b.WriteString(msg.Type)
	b.WriteString(`":`)
	b.Write(payload)
	if msg.ID != "" {
		b.WriteString(`,"biz_opaque_callback_data":`)
		b.Write(id)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// redact removes the token from an error's text, should any layer below
// ever include it (for example a base URL with the token pasted in).
func redact(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), token, "[redacted]"), err: err}
}

// redactedError keeps the chain for errors.Is/As but prints safely.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
