package httpapi

import (
	"context"
	"html/template"
	"net/http"
	"time"
)

// statusPage is the plain status page at "/": one table of accounts,
// refreshed every two seconds. It shows no secrets and needs no key, like
// /metrics, so the gateway binds to loopback by default.
var statusPage = template.Must(template.New("status").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">
<title>wamux</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.cooldown{color:#b60}.disabled{color:#b00}
</style></head><body>
<h1>wamux</h1>
<p>{{len .Accounts}} accounts · {{.Now.Format "15:04:05"}} · <a href="/metrics">metrics</a></p>
<table><tr><th>account</th><th>state</th><th>rate/s</th><th>burst</th><th>tokens</th><th>P0</th><th>P1</th><th>P2</th><th>cooldown until</th></tr>
{{range .Accounts}}<tr><td>{{.ID}}</td><td class="{{.State}}">{{.State}}</td><td>{{printf "%.1f" .RatePerSec}}</td><td>{{.Burst}}</td>
<td>{{printf "%.1f" .Tokens}}</td><td>{{index .QueueDepth "P0"}}</td><td>{{index .QueueDepth "P1"}}</td><td>{{index .QueueDepth "P2"}}</td>
<td>{{if .CooldownUntil}}{{.CooldownUntil.Format "15:04:05"}}{{end}}</td></tr>
{{end}}</table></body></html>`))

func (s *Server) handleStatusPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	accounts, err := s.store.ListAccounts(ctx)
	if err != nil {
		s.fail(w, r, "status page", err)
		return
	}
	views := make([]accountResponse, 0, len(accounts))
	for _, a := range accounts {
		views = append(views, s.accountView(a))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := statusPage.Execute(w, map[string]any{"Accounts": views, "Now": time.Now()}); err != nil {
		s.logger(r).Warn("render status page", "err", err)
	}
}
