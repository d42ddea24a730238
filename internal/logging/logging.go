// Package logging builds Joiner's one root zap logger and holds the shared
// field vocabulary, so every subsystem logs the same keys for the same things.
package logging

import (
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Shared field keys. Use these (via the helpers below) rather than ad-hoc names.
const (
	KeyNodeClaim    = "nodeclaim"
	KeyNodePool     = "nodepool"
	KeyNodeClass    = "nodeclass"
	KeyInstanceType = "instance-type"
	KeyInstance     = "instance"
	KeyPod          = "pod"
	KeyNode         = "node"
	KeyZone         = "zone"
	KeyCapacityType = "capacity-type"
	KeyNotice       = "notice"
	KeyDevice       = "device"
)

// NodeClaim is the zap field for a NodeClaim name.
func NodeClaim(name string) zap.Field { return zap.String(KeyNodeClaim, name) }

// NodePool is the zap field for a NodePool name.
func NodePool(name string) zap.Field { return zap.String(KeyNodePool, name) }

// InstanceType is the zap field for an EC2 instance type.
func InstanceType(name string) zap.Field { return zap.String(KeyInstanceType, name) }

// Pod is the zap field for a pod, as namespace/name.
func Pod(namespace, name string) zap.Field { return zap.String(KeyPod, namespace+"/"+name) }

// Node is the zap field for a Node name.
func Node(name string) zap.Field { return zap.String(KeyNode, name) }

// Options configure the root logger.
type Options struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is json (default) or console.
	Format string
}

// New builds the root logger. Subsystems call .Named("provisioner") etc.
func New(opts Options) (*zap.Logger, error) {
	lvl := zapcore.InfoLevel
	if opts.Level != "" {
		if err := lvl.UnmarshalText([]byte(opts.Level)); err != nil {
			return nil, fmt.Errorf("log level %q: want debug, info, warn or error", opts.Level)
		}
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "time"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch opts.Format {
	case "", "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log format %q: want json or console", opts.Format)
	}
	core := zapcore.NewCore(encoder, zapcore.Lock(os.Stderr), lvl)
	return zap.New(core, zap.AddCaller()), nil
}
