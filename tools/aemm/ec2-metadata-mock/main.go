// Command ec2-metadata-mock is amazon-ec2-metadata-mock (AEMM) built from the Go
// module proxy for Joiner's IMDS tests.
package main

import (
	"fmt"
	"os"

	"github.com/aws/amazon-ec2-metadata-mock/pkg/cmd/root"
)

func main() {
	if err := root.NewCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ec2-metadata-mock:", err)
		os.Exit(1)
	}
}
