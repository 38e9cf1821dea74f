// Package cputime reads how much CPU time the process has used: the
// benchmarks report it per operation, and the receipt pipeline's appender
// asks how busy the CPUs are before it holds a group commit open.
package cputime
