package embedded

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger returns a zap logger that forwards etcd's records at level
// min and above to l. Once closing is set, records are logged at debug
// level: etcd reports its own shutdown as errors.
func newZapLogger(l *slog.Logger, min zapcore.Level, closing *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{logger: l, min: min, closing: closing})
}

// slogCore is a zapcore.Core writing to a *slog.Logger. etcd logs a lot at
// info; only what reaches min is forwarded.
type slogCore struct {
	logger  *slog.Logger
	min     zapcore.Level
	closing *atomic.Bool
	fields  []zapcore.Field // accumulated by With
}

// harmless reports whether msg is a warning etcd logs on every start of a
// loopback, single-member, plain-HTTP server: logged at debug level.
func harmless(msg string) bool {
	switch msg {
	case "Running http and grpc server on single port. This is not recommended for production.",
		"simple token is not cryptographically signed":
		return true
	}
	return false
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	all := make([]zapcore.Field, 0, len(c.fields)+len(fields))
	all = append(append(all, c.fields...), fields...)
	return &slogCore{logger: c.logger, min: c.min, closing: c.closing, fields: all}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	level := slogLevel(e.Level)
	if c.closing.Load() || harmless(e.Message) {
		level = slog.LevelDebug
	}
	c.logger.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l >= zapcore.WarnLevel:
		return slog.LevelWarn
	case l >= zapcore.InfoLevel:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}
