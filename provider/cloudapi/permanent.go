package cloudapi

import (
	"encoding/json"
	"net/http"
)

// PermanentCode reports whether a Meta error code on a failed status means
// the message will never be delivered as it is. It asks Classify, so a
// code has one meaning whether it comes back from a send or in a webhook.
func PermanentCode(code int) bool {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code}})
	return Classify(http.StatusBadRequest, body, nil, nil).Outcome == Permanent
}
