// Command wamux is the WhatsApp multi-account gateway: the server, the
// Cloud API simulator, a one-process demo and the load tool.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command runs one subcommand. Signals arrive as cancellation of ctx; the
// command writes to the given writers only, so tests can run it in process.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"serve": {"run the gateway", runServe},
		"sim":   {"run the WhatsApp Cloud API simulator", runSim},
		"demo":  {"run gateway, simulator and traffic in one process", runDemo},
		"bench": {"measure throughput and correctness under load", runBench},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wamux: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: wamux <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, name := range []string{"serve", "sim", "demo", "bench"} {
		fmt.Fprintf(w, "  %-6s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w, "\nrun 'wamux <command> --help' for its flags")
}

// noArgs reports whether fs took every argument; otherwise it names the
// rest, so that a word meant as a flag's value ("wamux demo 30s") is not
// ignored while the command runs without it.
func noArgs(fs *flag.FlagSet, stderr io.Writer) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
	return false
}
