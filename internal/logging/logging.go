// Package logging builds Joiner's one root zap logger and holds the shared
// field vocabulary, so every subsystem logs the same keys for the same things.
package logging

import (
	"fmt"
	"os"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
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

// EncoderConfig is the encoder Karpenter's JSON logs use, so log queries
// written for Karpenter carry over: keys time, level, logger, caller and
// message; levels in capitals (INFO); ISO 8601 times; durations as "1.5s".
func EncoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		MessageKey:     "message",
		LevelKey:       "level",
		TimeKey:        "time",
		NameKey:        "logger",
		CallerKey:      "caller",
		FunctionKey:    zapcore.OmitKey,
		StacktraceKey:  "stacktrace",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    zapcore.CapitalLevelEncoder,
		EncodeTime:     zapcore.ISO8601TimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	}
}

// New builds the root logger. Subsystems call .Named("provisioner") etc.
func New(opts Options) (*zap.Logger, error) {
	return NewTo(zapcore.Lock(os.Stderr), opts)
}

// NewTo is New writing to w.
func NewTo(w zapcore.WriteSyncer, opts Options) (*zap.Logger, error) {
	lvl := zapcore.InfoLevel
	if opts.Level != "" {
		if err := lvl.UnmarshalText([]byte(opts.Level)); err != nil {
			return nil, fmt.Errorf("log level %q: want debug, info, warn or error", opts.Level)
		}
	}
	enc := EncoderConfig()
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
	core := zapcore.NewCore(encoder, w, lvl)
	return zap.New(core, zap.AddCaller()), nil
}

// RouteKlog sends what client-go and the other Kubernetes libraries log
// through klog to log (named "klog"), in the same format as everything
// else, instead of klog's own text on stderr. zapr maps klog's V(n) to zap
// level -n, so V(1) shows at --log-level debug and higher verbosities are
// dropped (klog's own -v stays 0), as Karpenter's logger does.
func RouteKlog(log *zap.Logger) {
	klog.SetLogger(zapr.NewLogger(log.Named("klog")))
}
