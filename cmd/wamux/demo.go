package main

var runDemo = notImplemented("demo")
