package cluster

import (
	"fmt"
	"io"
	"log"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapHCLog adapts a zap logger to hclog.Logger for raft (and, later,
// autopilot). hclog's key/value pairs become zap fields.
type zapHCLog struct {
	z       *zap.Logger
	name    string
	implied []any
	level   hclog.Level
}

// NewHCLog returns an hclog.Logger that writes through z at Info and above
// (raft's Debug/Trace chatter is dropped unless z is at debug level).
func NewHCLog(z *zap.Logger) hclog.Logger {
	lvl := hclog.Info
	if z.Core().Enabled(zapcore.DebugLevel) {
		lvl = hclog.Debug
	}
	return &zapHCLog{z: z, level: lvl}
}

func fields(args []any) []zap.Field {
	fs := make([]zap.Field, 0, len(args)/2+1)
	for i := 0; i < len(args); i += 2 {
		key := fmt.Sprint(args[i])
		if i+1 >= len(args) {
			fs = append(fs, zap.Any("EXTRA_VALUE_AT_END", args[i]))
			break
		}
		if err, ok := args[i+1].(error); ok {
			fs = append(fs, zap.NamedError(key, err))
			continue
		}
		fs = append(fs, zap.Any(key, args[i+1]))
	}
	return fs
}

func (l *zapHCLog) Log(level hclog.Level, msg string, args ...any) {
	if level < l.level || level == hclog.Off {
		return
	}
	fs := fields(args)
	switch {
	case level <= hclog.Debug:
		l.z.Debug(msg, fs...)
	case level == hclog.Info:
		l.z.Info(msg, fs...)
	case level == hclog.Warn:
		l.z.Warn(msg, fs...)
	default:
		l.z.Error(msg, fs...)
	}
}

func (l *zapHCLog) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *zapHCLog) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *zapHCLog) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *zapHCLog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *zapHCLog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }
func (l *zapHCLog) IsTrace() bool                 { return l.level <= hclog.Trace }
func (l *zapHCLog) IsDebug() bool                 { return l.level <= hclog.Debug }
func (l *zapHCLog) IsInfo() bool                  { return l.level <= hclog.Info }
func (l *zapHCLog) IsWarn() bool                  { return l.level <= hclog.Warn }
func (l *zapHCLog) IsError() bool                 { return l.level <= hclog.Error }
func (l *zapHCLog) ImpliedArgs() []any            { return l.implied }
func (l *zapHCLog) Name() string                  { return l.name }
func (l *zapHCLog) SetLevel(level hclog.Level)    { l.level = level }
func (l *zapHCLog) GetLevel() hclog.Level         { return l.level }

func (l *zapHCLog) With(args ...any) hclog.Logger {
	c := *l
	c.z = l.z.With(fields(args)...)
	c.implied = append(append([]any{}, l.implied...), args...)
	return &c
}

func (l *zapHCLog) Named(name string) hclog.Logger {
	c := *l
	c.z = l.z.Named(name)
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (l *zapHCLog) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	c.z = l.z.Named(name)
	return &c
}

func (l *zapHCLog) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return zap.NewStdLog(l.z)
}

func (l *zapHCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return zap.NewStdLog(l.z).Writer()
}

// NewStdLog is the bridge for memberlist, which takes a *log.Logger.
func NewStdLog(z *zap.Logger) *log.Logger { return zap.NewStdLog(z) }
