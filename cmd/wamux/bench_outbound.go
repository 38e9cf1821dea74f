package main

var runBenchOutbound = notImplemented("bench outbound")
