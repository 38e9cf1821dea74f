package main

var runServe = notImplemented("serve")
