package main

var runSim = notImplemented("sim")
