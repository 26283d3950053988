package readapi

import (
	"fmt"
	"log/slog"
)

// fasthttpLogger sends fasthttp's messages to slog.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn(fmt.Sprintf(format, args...), "component", "fasthttp")
}
