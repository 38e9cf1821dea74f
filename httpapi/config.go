package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/wamux/wamux"
)

func (s *Server) handleGetConfig(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"settings": s.settings.Current().Map()})
}

// handlePatchConfig changes runtime settings. Values may be given as JSON
// strings ("90s", "true") or as numbers and booleans; the whole change is
// validated before anything is stored.
func (s *Server) handlePatchConfig(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if err := decodeJSON(w, r, MaxBodyV1, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if len(req) == 0 {
		writeError(w, r, wamux.Errorf(wamux.EInvalid, "nothing to change"))
		return
	}
	changes := make(map[string]string, len(req))
	for k, raw := range req {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			writeError(w, r, wamux.Errorf(wamux.EInvalid, "setting %s: not a JSON value", k))
			return
		}
		switch x := v.(type) {
		case string:
			changes[k] = x
		case bool:
			changes[k] = strconv.FormatBool(x)
		case float64:
			changes[k] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			writeError(w, r, wamux.Errorf(wamux.EInvalid, "setting %s must be a string, number or boolean", k))
			return
		}
	}
	ctx, cancel := s.storeCtx(r)
	defer cancel()
	next, err := s.settings.Update(ctx, changes)
	if err != nil {
		s.fail(w, r, "update settings", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"settings": next.Map()})
}
