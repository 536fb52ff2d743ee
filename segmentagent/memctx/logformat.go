package memctx

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Record is one server log entry: who wrote it and its message.
type Record struct {
	PID     int64
	Message string
}

// LogFormat reads one of the server's log destinations.
type LogFormat interface {
	// Name is the log_destination value: jsonlog, csvlog or stderr.
	Name() string
	// Next returns the first complete entry of buf and how many bytes it
	// took; n is 0 when buf holds no complete entry yet.
	Next(buf []byte) (entry []byte, n int)
	// Parse reads one entry; ok is false for one it cannot read (another
	// process's continuation line, a foreign line).
	Parse(entry []byte) (r Record, ok bool)
}

// nextLine is Next for formats with one entry per line.
func nextLine(buf []byte) ([]byte, int) {
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil, 0
	}
	return buf[:i], i + 1
}

// JSONLog reads log_destination=jsonlog (PostgreSQL 15+): one object per line.
type JSONLog struct{}

// Name implements LogFormat.
func (JSONLog) Name() string { return "jsonlog" }

// Next implements LogFormat.
func (JSONLog) Next(buf []byte) ([]byte, int) { return nextLine(buf) }

// Parse implements LogFormat.
func (JSONLog) Parse(entry []byte) (Record, bool) {
	var e struct {
		PID     *int64  `json:"pid"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(entry, &e); err != nil || e.PID == nil || e.Message == nil {
		return Record{}, false
	}
	return Record{PID: *e.PID, Message: *e.Message}, true
}

// CSVLog reads log_destination=csvlog: one CSV record per entry, whose
// quoted fields may span lines.
type CSVLog struct{}

// csvlog columns (the same from PostgreSQL 9.0 through 17, Greenplum adds
// its own after them).
const (
	csvPID     = 3
	csvMessage = 13
)

// Name implements LogFormat.
func (CSVLog) Name() string { return "csvlog" }

// Next implements LogFormat: a newline ends a record only outside quotes
// ("" inside a quoted field toggles twice and so changes nothing).
func (CSVLog) Next(buf []byte) ([]byte, int) {
	quoted := false
	for i, c := range buf {
		switch c {
		case '"':
			quoted = !quoted
		case '\n':
			if !quoted {
				return buf[:i], i + 1
			}
		}
	}
	return nil, 0
}

// Parse implements LogFormat.
func (CSVLog) Parse(entry []byte) (Record, bool) {
	r := csv.NewReader(bytes.NewReader(entry))
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	if err != nil || len(fields) <= csvMessage {
		return Record{}, false
	}
	pid, err := strconv.ParseInt(fields[csvPID], 10, 64)
	if err != nil {
		return Record{}, false
	}
	return Record{PID: pid, Message: fields[csvMessage]}, true
}

// ErrPrefixWithoutPID says a stderr log cannot be read: nothing in its
// lines tells which process wrote them.
var ErrPrefixWithoutPID = errors.New("log_line_prefix has no %p, so stderr log lines do not say which process wrote them; add %p to log_line_prefix (or log to jsonlog or csvlog)")

// StderrLog reads log_destination=stderr lines written with one log_line_prefix.
type StderrLog struct {
	prefix string
	re     *regexp.Regexp
}

// NewStderrLog compiles a log_line_prefix; it must contain %p.
func NewStderrLog(logLinePrefix string) (*StderrLog, error) {
	var pattern strings.Builder
	pattern.WriteString(`^`)
	var lit strings.Builder
	flush := func() {
		pattern.WriteString(regexp.QuoteMeta(lit.String()))
		lit.Reset()
	}
	hasPID, optional := false, false
	p := logLinePrefix
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 >= len(p) {
			lit.WriteByte(p[i])
			continue
		}
		i++
		// An optional padding such as %-10p or %10p.
		for i < len(p) && (p[i] == '-' || (p[i] >= '0' && p[i] <= '9')) {
			i++
		}
		if i >= len(p) {
			break
		}
		switch p[i] {
		case '%':
			lit.WriteByte('%')
		case 'p':
			flush()
			if hasPID {
				pattern.WriteString(` *\d+ *`)
			} else {
				pattern.WriteString(` *(\d+) *`)
			}
			hasPID = true
		case 'q':
			// Non-session processes stop the prefix here.
			flush()
			pattern.WriteString(`(?:`)
			optional = true
		default:
			flush()
			pattern.WriteString(`.*?`)
		}
	}
	flush()
	if optional {
		pattern.WriteString(`)?`)
	}
	if !hasPID {
		return nil, fmt.Errorf("log_line_prefix %q: %w", logLinePrefix, ErrPrefixWithoutPID)
	}
	// The severity is translated, its "%s:  " separator is not.
	pattern.WriteString(`[^:]*:  (.*)$`)
	re, err := regexp.Compile(pattern.String())
	if err != nil {
		return nil, fmt.Errorf("log_line_prefix %q: %w", logLinePrefix, err)
	}
	return &StderrLog{prefix: logLinePrefix, re: re}, nil
}

// Name implements LogFormat.
func (*StderrLog) Name() string { return "stderr" }

// Next implements LogFormat.
func (*StderrLog) Next(buf []byte) ([]byte, int) { return nextLine(buf) }

// Parse implements LogFormat.
func (s *StderrLog) Parse(entry []byte) (Record, bool) {
	m := s.re.FindSubmatch(entry)
	if m == nil {
		return Record{}, false
	}
	pid, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		return Record{}, false
	}
	return Record{PID: pid, Message: string(m[2])}, true
}
