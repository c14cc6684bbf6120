// Command schemagen writes the JSON Schema of the ladder config file. It is
// run by `go generate ./config`, which keeps config/ladder.schema.json in
// step with the Go types the parser decodes into.
package main

import (
	"fmt"
	"os"

	"github.com/ladderhq/ladder/config"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: schemagen OUTPUT.json")
	}
	b, err := config.Schema()
	if err != nil {
		return err
	}
	return os.WriteFile(args[0], b, 0o644)
}
