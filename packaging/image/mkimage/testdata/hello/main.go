// Command hello is the small binary mkimage's test cross-compiles instead
// of joiner: one dependency, so the SBOM has a module to list.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

var version = "dev"

func main() {
	name := pflag.String("name", "world", "who to greet")
	pflag.Parse()
	fmt.Fprintln(os.Stdout, "hello", *name, version)
}
