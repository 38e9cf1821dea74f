package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
)

// apiError is an error the simulator answers with, in Meta's shape
// (reference §2).
type apiError struct {
	status  int
	code    int
	subcode int
	typ     string
	message string
	details string
	// retryAfter, in seconds, adds a Retry-After header when positive.
	retryAfter int
}

// errorBody is the JSON of an error answer.
type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Message   string     `json:"message"`
	Type      string     `json:"type"`
	Code      int        `json:"code"`
	ErrorData *errorData `json:"error_data,omitempty"`
	Subcode   int        `json:"error_subcode,omitempty"`
	FBTraceID string     `json:"fbtrace_id"`
}

type errorData struct {
	MessagingProduct string `json:"messaging_product"`
	Details          string `json:"details"`
}

var traceSeq atomic.Uint64

func (e *apiError) body() []byte {
	f := errorFields{
		Message: e.message, Type: e.typ, Code: e.code, Subcode: e.subcode,
		FBTraceID: "Asim" + strconv.FormatUint(traceSeq.Add(1), 36),
	}
	if f.Type == "" {
		f.Type = "OAuthException"
	}
	if e.details != "" {
		f.ErrorData = &errorData{MessagingProduct: "whatsapp", Details: e.details}
	}
	b, _ := json.Marshal(errorBody{Error: f})
	return b
}

func (e *apiError) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	w.WriteHeader(e.status)
	w.Write(e.body())
}

// badParam is code 100, Meta's answer to any malformed or missing field.
func badParam(message, details string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: 100, message: "(#100) " + message, details: details}
}

func errUnknownNumber(id string) *apiError {
	return &apiError{
		status: http.StatusBadRequest, code: 100, subcode: 33, typ: "GraphMethodException",
		message: "Unsupported post request. Object with ID '" + id + "' does not exist, cannot be loaded due to missing permissions, or does not support this operation.",
	}
}

func errBadToken(detail string) *apiError {
	return &apiError{status: http.StatusUnauthorized, code: 190, message: "Invalid OAuth access token - " + detail}
}

func errThroughput() *apiError {
	return &apiError{
		status: http.StatusBadRequest, code: 130429, subcode: 2494055, message: "(#130429) Rate limit hit",
		details: "Cloud API message throughput has been reached.",
	}
}

func errPairLimit() *apiError {
	return &apiError{
		status: http.StatusBadRequest, code: 131056,
		message: "(#131056) (Business Account, Consumer Account) pair rate limit hit",
		details: "Message failed to send because there were too many messages sent from this phone number to the same phone number in a short period of time.",
	}
}

func errServer(alt bool) *apiError {
	if alt {
		return &apiError{status: http.StatusServiceUnavailable, code: 2, message: "(#2) Service temporarily unavailable", details: "Service temporarily unavailable"}
	}
	return &apiError{status: http.StatusInternalServerError, code: 131000, message: "(#131000) Something went wrong", details: "Something went wrong"}
}

// asyncError is how a code looks on a failed status webhook.
func asyncError(code int) (title, details string) {
	switch code {
	case 131049:
		return "This message was not delivered to maintain healthy ecosystem engagement.",
			"In order to maintain a healthy ecosystem engagement, the message failed to be delivered."
	case 131026:
		return "Message undeliverable", "Message Undeliverable."
	case 131047:
		return "Re-engagement message", "Message failed to send because more than 24 hours have passed since the customer last replied to this number."
	case 131050:
		return "Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business.", "The recipient has stopped marketing messages."
	}
	return "Message failed", "Message failed with code " + strconv.Itoa(code) + "."
}

// codeError is the answer for an injected error code, with the HTTP
// status of Meta's older error table (reference §2) and its titles.
func codeError(code int) *apiError {
	switch code {
	case 130429:
		return errThroughput()
	case 131056:
		return errPairLimit()
	case 131000:
		return errServer(false)
	case 2:
		return errServer(true)
	}
	e := &apiError{status: http.StatusBadRequest, code: code, message: "(#" + strconv.Itoa(code) + ") " + codeTitle(code)}
	e.details = codeTitle(code) + "."
	switch {
	case code == 0 || code == 190:
		e.status = http.StatusUnauthorized
	case code == 368 || code == 131031 || code == 10 || code == 131005 || (code >= 200 && code <= 299):
		e.status = http.StatusForbidden
	case code == 3 || code == 131016 || code == 131057 || code == 131045:
		e.status = http.StatusInternalServerError
	case code == 132001:
		e.status = http.StatusNotFound
	}
	return e
}

func codeTitle(code int) string {
	switch code {
	case 1:
		return "An unknown error occurred"
	case 4:
		return "Application request limit reached"
	case 80007:
		return "Rate limit issues"
	case 131016:
		return "Service unavailable"
	case 131026:
		return "Message undeliverable"
	case 131031:
		return "Business Account locked"
	case 131047:
		return "Re-engagement message"
	case 131048:
		return "Spam rate limit hit"
	case 131049:
		return "Meta chose not to deliver"
	case 131050:
		return "User stopped marketing messages"
	case 131057:
		return "Account in maintenance mode"
	case 130403:
		return "Business has blocked this user"
	case 368:
		return "Temporarily blocked for policies violations"
	case 190:
		return "Access token has expired"
	case 132000:
		return "Number of parameters does not match the expected number of params"
	case 132001:
		return "Template does not exist"
	}
	return "Error"
}
