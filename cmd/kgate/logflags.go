package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// logFlags are the logging flags of every serving command: slog's level,
// and kube-apiserver's --logging-format and -v.
type logFlags struct {
	level  *string
	format *string
	v      *int
}

func addLogFlags(fs *flag.FlagSet) logFlags {
	return logFlags{
		level:  fs.String("log-level", "info", "debug, info, warn or error"),
		format: fs.String("logging-format", "text", "text or json, as kube-apiserver's --logging-format"),
		v:      fs.Int("v", 0, "verbosity, as kube-apiserver's -v: 4 and above log at debug level whatever --log-level says"),
	}
}

func (f logFlags) logger() (*slog.Logger, error) {
	return newLogger(os.Stderr, *f.level, *f.format, *f.v)
}

// newLogger writes to w at level (lowered to debug by a verbosity of 4 or
// more, kube-apiserver's debug verbosity) in format.
func newLogger(w io.Writer, level, format string, v int) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("cannot parse --log-level %q: %w", level, err)
	}
	if v < 0 {
		return nil, fmt.Errorf("cannot use -v %d: verbosity is 0 or more", v)
	}
	if v >= 4 && l > slog.LevelDebug {
		l = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("cannot use --logging-format %q: text or json", format)
}
