// Package e2e holds tests that run the whole gateway the way an operator
// sees it: the real app with the Cloud API simulator and demo traffic, the
// dashboard in a headless browser, /metrics against docs/metrics.md and the
// deploy/ files, and runtime settings changed while traffic flows. It has
// no code of its own.
package e2e
