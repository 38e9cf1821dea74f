package main

var (
	runBenchReceipts = notImplemented("bench receipts")
	runBenchWebhook  = notImplemented("bench webhook")
)
