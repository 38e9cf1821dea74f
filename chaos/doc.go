// Package chaos runs seeded rounds of real `wamux serve` processes
// against the Cloud API simulator with faults injected, kills the gateway
// with SIGKILL at random moments, restarts it on the same data, and then
// checks the gateway's promises from the simulator's ground truth, the
// statuses the gateway acknowledged and the events a subscriber received.
// A round is a function of its seed: the same seed draws the same faults,
// traffic and kill points (the timing of processes still varies).
// docs/reliability.md lists the invariants and the faults.
package chaos
