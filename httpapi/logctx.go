package httpapi

import (
	"context"
	"log/slog"
)

// WithRequestIDs wraps h so that a record logged with the context of an
// HTTP request (InfoContext(ctx, …) anywhere below a handler: settings,
// dispatcher, store) carries that request's id, even when the logger was
// not derived from the request. Every line of a request can then be found
// together. A logger that already has a request_id attribute (Server.logger)
// is left alone, so no line carries it twice.
func WithRequestIDs(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestID(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	for _, a := range attrs {
		if a.Key == "request_id" {
			return h.Handler.WithAttrs(attrs)
		}
	}
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
