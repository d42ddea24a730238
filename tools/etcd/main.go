// Command etcd is etcd v3.5 built from the Go module proxy for Joiner's test control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
