// Package progress draws a progress bar on a terminal and plain progress
// lines anywhere else (CI logs, files).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bar shows done/total of a task. Add is safe for concurrent use; Close
// draws the final state and stops the drawing goroutine.
type Bar struct {
	w     io.Writer
	tty   bool
	label string
	total int64
	done  atomic.Int64
	start time.Time

	stop chan struct{}
	wg   sync.WaitGroup

	// lastPlain is the last progress tenth a plain line was written for;
	// only the drawing goroutine and Close (after it stopped) touch it.
	lastPlain int64
	lastAt    time.Time
}

// New starts a bar on w (nil: io.Discard). It draws in place when w is a
// terminal, else it writes a line at each tenth and at most every 5s.
func New(w io.Writer, label string, total int64) *Bar {
	if w == nil {
		w = io.Discard
	}
	b := &Bar{w: w, tty: IsTerminal(w), label: label, total: max(total, 1), start: time.Now(), stop: make(chan struct{}), lastPlain: -1}
	b.lastAt = b.start
	every := 5 * time.Second
	if b.tty {
		every = 200 * time.Millisecond
	}
	b.wg.Go(func() {
		t := time.NewTicker(min(every, time.Second))
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				b.draw(false)
			}
		}
	})
	return b
}

// Add counts n more done.
func (b *Bar) Add(n int64) { b.done.Add(n) }

// Close draws the final line.
func (b *Bar) Close() {
	select {
	case <-b.stop:
		return
	default:
	}
	close(b.stop)
	b.wg.Wait()
	b.draw(true)
}

func (b *Bar) draw(final bool) {
	done := b.done.Load()
	el := time.Since(b.start)
	rate := float64(done) / max(el.Seconds(), 1e-3)
	frac := min(float64(done)/float64(b.total), 1)
	eta := "-"
	if rate > 0 && done < b.total {
		eta = time.Duration(float64(b.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	if b.tty {
		const width = 30
		fill := int(frac * width)
		bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
		if fill < width {
			bar = bar[:fill] + ">" + bar[fill+1:]
		}
		end := ""
		if final {
			end = "\n"
		}
		fmt.Fprintf(b.w, "\r\033[K%s [%s] %3.0f%% %d/%d %.0f/s eta %s%s", b.label, bar, frac*100, done, b.total, rate, eta, end)
		return
	}
	tenth := int64(frac * 10)
	if !final && tenth == b.lastPlain && time.Since(b.lastAt) < 5*time.Second {
		return
	}
	if !final && done == 0 {
		return
	}
	b.lastPlain, b.lastAt = tenth, time.Now()
	state := "eta " + eta
	if final {
		state = "took " + el.Round(time.Millisecond).String()
	}
	fmt.Fprintf(b.w, "%s: %d/%d (%.0f%%) %.0f/s %s\n", b.label, done, b.total, frac*100, rate, state)
}

// IsTerminal tells whether w is a character device (a terminal) and TERM
// does not say it cannot draw.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
