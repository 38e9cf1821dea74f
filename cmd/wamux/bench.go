package main

var runBench = notImplemented("bench")
